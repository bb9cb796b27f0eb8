"""Input past a limit (size after decompression, messages, header block, line) is refused in one line
with exit 2 and the flag that raises it; raising the flag lets the same input through. Timings and
peak memory on the oversized inputs are in bench/limits.py."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import pytest

from patchbench.errors import BadInput
from patchbench.mail import InputLimits, read_mails
from patchbench.mail.limits import parse_size
from tests.support.thread_cases import posting

ROOT = Path(__file__).resolve().parents[1]
SERIES = b"".join(b"From mboxrd@z Thu Jan  1 00:00:00 1970\n" + m + b"\n" for m in posting("lim", 1, 0))


def _cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "patchbench", *args], capture_output=True, cwd=ROOT,
                          input=stdin)


def _refused(proc: subprocess.CompletedProcess, flag: str) -> None:
    stderr = proc.stderr.decode()
    assert proc.returncode == 2, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("patchbench: error: "), stderr
    assert f"(raise the limit with {flag})" in stderr and "Traceback" not in stderr


def test_a_gzip_of_zeros_is_refused_at_its_first_megabyte(tmp_path):
    bomb = tmp_path / "bomb.mbox.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as out:
        block = bytes(1 << 20)
        for _ in range(256):
            out.write(block)
    proc = _cli("series", str(bomb), "--max-input-size", "1G")
    _refused(proc, "--max-line-length")
    assert "a line longer than 1 MiB" in proc.stderr.decode()


def test_a_gzip_bomb_of_lines_is_refused_at_the_default_size_limit(tmp_path):
    lines = gzip.compress((b"x" * 79 + b"\n") * ((1 << 20) // 80))   # 1 MiB of short lines per member
    bomb = tmp_path / "lines.mbox.gz"
    bomb.write_bytes(lines * 160)                                     # 160 MiB inflated: past the 128 MiB
    proc = _cli("series", str(bomb))
    _refused(proc, "--max-input-size")
    assert "more than 128 MiB of mail" in proc.stderr.decode()


def _padded_series(tmp_path: Path) -> Path:
    path = tmp_path / "series.mbox"
    path.write_bytes(SERIES + b"From mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: x <x@example.org>\n"
                     + b"Subject: padding\n\n" + b"text line\n" * 300_000)
    return path


@pytest.mark.parametrize("compressed", [False, True])
def test_size_limit_counts_the_inflated_bytes_and_the_flag_raises_it(tmp_path, compressed):
    path = _padded_series(tmp_path)          # about 3 MB of mail
    if compressed:
        path = path.with_suffix(".mbox.gz")
        path.write_bytes(gzip.compress(_padded_series(tmp_path).read_bytes()))
        assert path.stat().st_size < (1 << 20)
    _refused(_cli("series", str(path), "--max-input-size", "1M"), "--max-input-size")
    proc = _cli("series", str(path), "--max-input-size", "4M", "--json")
    assert proc.returncode == 0, proc.stderr


def test_message_limit_and_its_flag(tmp_path):
    path = _padded_series(tmp_path)          # 5 messages
    _refused(_cli("series", str(path), "--max-messages", "4"), "--max-messages")
    assert _cli("series", str(path), "--max-messages", "5").returncode == 0


def test_message_limit_counts_every_file_of_a_directory(tmp_path):
    for n in range(3):
        (tmp_path / f"{n:04}.patch").write_bytes(SERIES)    # 4 messages each
    _refused(_cli("series", str(tmp_path), "--max-messages", "10"), "--max-messages")


def test_header_block_limit_and_its_flag(tmp_path):
    path = tmp_path / "header.mbox"
    hops = b"".join(b"X-Received: hop %d\n" % n for n in range(5000))     # a 100 KB header block
    path.write_bytes(SERIES.replace(b"MIME-Version: 1.0\n", hops + b"MIME-Version: 1.0\n"))
    _refused(_cli("series", str(path), "--max-header-size", "64K"), "--max-header-size")
    assert _cli("series", str(path), "--max-header-size", "1M").returncode == 0


def test_line_limit_and_its_flag_also_on_standard_input(tmp_path):
    long_line = SERIES.replace(b"Three fixes to the toy ring buffer.", b"Three fixes. " + b"w" * 100_000)
    _refused(_cli("series", "-", "--max-line-length", "64K", stdin=long_line), "--max-line-length")
    assert _cli("series", "-", "--max-line-length", "128K", stdin=long_line).returncode == 0


def test_standard_input_is_held_to_the_size_limit():
    _refused(_cli("series", "-", "--max-input-size", "1K", stdin=SERIES), "--max-input-size")


def test_an_endless_line_is_never_held_whole(tmp_path):
    """Reading stops one byte past the line limit: a 64 MiB line costs no 64 MiB of memory."""
    path = tmp_path / "line.mbox"
    path.write_bytes(b"From: a <a@b.c>\nSubject: x\n\n" + b"z" * (64 << 20))
    with pytest.raises(BadInput, match="a line longer than 1 MiB"):
        list(read_mails(str(path), InputLimits(max_input_size=1 << 30)))


@pytest.mark.parametrize("command", ["series", "apply", "check", "run"])
def test_every_command_reading_mail_documents_the_limits(command):
    proc = _cli(command, "--help")
    help_text = proc.stdout.decode()
    for flag in ("--max-input-size", "--max-messages", "--max-header-size", "--max-line-length"):
        assert flag in help_text, (command, flag)


@pytest.mark.parametrize("value", ["0", "-3", "lots", "12Q"])
def test_a_bad_limit_value_is_a_usage_error(value, tmp_path):
    path = tmp_path / "s.mbox"
    path.write_bytes(SERIES)
    proc = _cli("series", str(path), "--max-input-size", value)
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1


def test_sizes_read_with_binary_units():
    assert [parse_size(s) for s in ("4096", "512K", "300M", "2G", "1GiB")] == [4096, 512 << 10, 300 << 20, 2 << 30,
                                                                             1 << 30]
