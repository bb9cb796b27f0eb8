"""A throwaway PostgreSQL server on loopback (Debian's postgresql package), for the bot's state store.

initdb into a fresh directory owned by the `postgres` user (the server refuses to run as root),
trust authentication on 127.0.0.1 only, a random free port; stopped and removed afterwards.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(found[-1]).parent if found else None


class PostgresServer:
    def __init__(self, bin_dir: Path):
        self.bin = bin_dir
        self.user = pwd.getpwnam("postgres") if os.geteuid() == 0 else None
        self.root = Path(tempfile.mkdtemp(prefix="patchbench-pg-"))
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *argv: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if self.user else []
        subprocess.run([*prefix, *argv], check=True, capture_output=True, timeout=120)

    def __enter__(self) -> PostgresServer:
        if self.user:
            os.chown(self.root, self.user.pw_uid, self.user.pw_gid)
        data = self.root / "data"
        self._run(str(self.bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run(str(self.bin / "pg_ctl"), "-D", str(data), "-l", str(self.root / "log"), "-w", "start", "-o",
                  f"-h 127.0.0.1 -p {self.port} -k {self.root} -c fsync=off")
        return self

    def __exit__(self, *exc) -> None:
        try:
            self._run(str(self.bin / "pg_ctl"), "-D", str(self.root / "data"), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
