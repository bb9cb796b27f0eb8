"""The deployment files the documents give to copy (docs/farm.md's compose file and worker unit, the
README's bot unit), read by the tools that will read them: Compose's own parser (`docker compose
config`, or Debian's `docker-compose`) and `systemd-analyze verify`. Neither needs a Docker engine or systemd running as PID 1. And the image's
`pip install` of the project (not an editable install) ships every file the package reads.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FARM = ROOT / "docs" / "farm.md"


def doc_block(doc: Path, heading: str) -> str:
    """The first indented block after the line `heading` of `doc`, unindented."""
    lines = doc.read_text().split(f"\n{heading}\n", 1)[1].splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("    "))
    block = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    return "\n".join(block).strip() + "\n"


def compose_files(into: Path) -> Path:
    """The Dockerfile and compose.yaml of the Compose section, written into `into`; the compose file."""
    text = doc_block(FARM, "### Compose (Redis and workers)")
    dockerfile, compose = text.split("# compose.yaml\n")
    assert dockerfile.startswith("# Dockerfile\n")
    (into / "Dockerfile").write_text(dockerfile)
    (into / "compose.yaml").write_text(compose)
    return into / "compose.yaml"


def compose_command() -> list[str]:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    if shutil.which("docker-compose"):
        return [shutil.which("docker-compose")]
    pytest.skip("neither Docker's Compose plugin (docker compose) nor docker-compose is installed "
                "(Debian: apt-get install docker-compose): the compose file is not checked")


def test_the_compose_file_parses_and_a_worker_elsewhere_takes_the_broker_from_the_environment(tmp_path):
    compose = [*compose_command(), "--project-directory", str(tmp_path), "-f", str(compose_files(tmp_path))]
    env = {k: v for k, v in os.environ.items() if k != "PATCHBENCH_BROKER"}
    here = subprocess.run([*compose, "config"], capture_output=True, text=True, env=env, timeout=60)
    assert here.returncode == 0 and here.stderr == "", here.stderr
    assert "PATCHBENCH_BROKER: redis://redis:6379/0" in here.stdout
    elsewhere = subprocess.run([*compose, "config"], capture_output=True, text=True, timeout=60,
                               env={**env, "PATCHBENCH_BROKER": "redis://farm.example.org:6379/0"})
    assert elsewhere.returncode == 0, elsewhere.stderr
    assert "PATCHBENCH_BROKER: redis://farm.example.org:6379/0" in elsewhere.stdout


@pytest.mark.parametrize("doc, heading, name", [
    (FARM, "### systemd", "patchbench-worker@1.service"),
    (ROOT / "README.md", "Run it as a service (systemd, `/etc/systemd/system/patchbench-bot.service`):",
     "patchbench-bot.service"),
], ids=["worker", "bot"])
def test_the_systemd_unit_verifies(tmp_path, doc, heading, name):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian: systemd): the unit is not checked")
    unit = doc_block(doc, heading)
    # verify wants the commands to exist: a stand-in where the unit says patchbench is installed
    stand_in = tmp_path / "bin" / "patchbench"
    stand_in.parent.mkdir()
    stand_in.write_text("#!/bin/sh\n")
    stand_in.chmod(0o755)
    assert "ExecStart=/usr/local/bin/patchbench " in unit
    (tmp_path / name).write_text(unit.replace("/usr/local/bin/patchbench", str(stand_in)))
    done = subprocess.run([analyze, "verify", "--man=no", str(tmp_path / name)],
                          capture_output=True, text=True, timeout=60)
    # It says what it ignored (an unknown key, a bad value) and still exits 0: no output is the pass.
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


def test_the_images_install_ships_every_file_of_the_package(tmp_path):
    """The Dockerfile's `pip install /opt/patchbench`: a wheel, holding only what pyproject.toml lists.
    Built from a copy of the project's files, as COPY makes it: a build in place leaves metadata behind
    that the next build would take its file list from."""
    copy = tmp_path / "patchbench"
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, files):
        if (ROOT / name).is_symlink() or (ROOT / name).is_file():   # not one deleted and not yet committed
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, copy / name, follow_symlinks=False)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(copy)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("patchbench-*.whl")
    shipped = set(zipfile.ZipFile(wheel).namelist())
    package = {str(Path(root, name).relative_to(ROOT))
               for root, _, names in os.walk(ROOT / "patchbench", followlinks=True) if "__pycache__" not in root
               for name in names}
    assert sorted(package - shipped) == []
