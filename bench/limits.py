"""Oversized inputs are refused in one line, quickly and in little memory: time and peak memory of a
whole `patchbench series` process on each, default limits, cold (nothing cached between runs).

    python3 bench/limits.py

Inputs (written to a temporary directory, each past one limit):
  gzip bomb           ~1 MB gzip inflating to 1 GiB of zeros (took 82 s and 11.6 GB before the limits):
                      one endless line, refused at its first MiB
  big gzip            200 gzip members of 1 MiB of real-shaped mail each: 200 MiB inflated
  big file            a 200 MiB mbox on disk (sparse: its size is what counts)
  many messages       60,000 small messages in one mbox (5.6 MB)
  long header         one message whose header block is 2 MiB
  long line           one message with a 2 MiB line in its body
Target: each under 2 s and under 200 MB, exit 2, one line on stderr.
"""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIL = (b"From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: Ada Lovelace <ada@example.org>\n"
        b"Subject: [PATCH net-next 1/2] ringbuf: mask the head index\nMessage-Id: <%d@example.org>\n\n"
        b"ring_pop() must not read past the buffer.\n\nSigned-off-by: Ada Lovelace <ada@example.org>\n---\n"
        b"diff --git a/drivers/net/ring.c b/drivers/net/ring.c\n--- a/drivers/net/ring.c\n+++ b/drivers/net/ring.c\n"
        b"@@ -10,3 +10,3 @@\n \tspin_lock(&r->lock);\n-\tv = r->buf[r->head];\n+\tv = r->buf[r->head & r->mask];\n"
        b" \tspin_unlock(&r->lock);\n\n")


def write_inputs(where: Path) -> dict[str, Path]:
    inputs = {}
    bomb = where / "bomb.mbox.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as out:
        block = bytes(1 << 20)
        for _ in range(1024):
            out.write(block)
    inputs["gzip bomb"] = bomb

    mebibyte = b"".join(MAIL % n for n in range((1 << 20) // len(MAIL)))
    member = gzip.compress(mebibyte)
    big_gzip = where / "big.mbox.gz"
    big_gzip.write_bytes(member * 200)
    inputs["big gzip"] = big_gzip

    big_file = where / "big.mbox"
    with open(big_file, "wb") as out:
        out.write(MAIL % 0)
        out.truncate(200 << 20)
    inputs["big file"] = big_file

    many = where / "many.mbox"
    many.write_bytes(b"".join(b"From x@y Mon Jan  1 00:00:00 2024\nFrom: a <a@b.c>\nSubject: m%d\n"
                              b"Message-Id: <%d@x>\n\nhi\n\n" % (n, n) for n in range(60_000)))
    inputs["many messages"] = many

    header = where / "header.mbox"
    header.write_bytes(b"From: a <a@b.c>\n" + (b"X-Padding: " + b"y" * 60 + b"\n") * ((2 << 20) // 72)
                       + b"Subject: x\n\nbody\n")
    inputs["long header"] = header

    line = where / "line.mbox"
    line.write_bytes(b"From: a <a@b.c>\nSubject: x\n\n" + b"z" * (2 << 20) + b"\n")
    inputs["long line"] = line
    return inputs


def measure(path: Path) -> tuple[float, float, int, int, str]:
    """Wall seconds, CPU seconds, peak resident MB, exit code and stderr of one whole process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "patchbench", "series", str(path)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss // 1024, proc.returncode, stderr


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="patchbench-limits-") as scratch:
        inputs = write_inputs(Path(scratch))
        print(f"{'input':<15} {'on disk':>9} {'wall s':>7} {'cpu s':>6} {'peak MB':>8} exit  message")
        worst = 0.0
        for name, path in inputs.items():
            wall, cpu, peak, code, stderr = measure(path)
            worst = max(worst, wall)
            lines = stderr.strip().splitlines()
            size = path.stat().st_size
            print(f"{name:<15} {size / 1e6:>7.1f}MB {wall:>7.2f} {cpu:>6.2f} {peak:>8} {code:>4}  "
                  f"{lines[-1] if lines else '(nothing)'}{'' if len(lines) == 1 else f'  [{len(lines)} lines]'}")
        print(f"slowest: {worst:.2f} s wall (load average now {os.getloadavg()[0]:.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
