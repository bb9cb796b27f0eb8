"""No hidden inputs: the same series checked from any working directory, with a cold or a warm
findings cache, gives the same report (byte for byte, but for the seconds each stage took).

The series is the one that exposed a hidden input: a patch that adds a tx queue stop to a driver
whose completion side (the wake) lives in a sibling file. What the sibling does is read through
the tree's call index, never from files relative to where the command runs; the findings cache
key covers the index, so a warm cache cannot replay an answer given for another input.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.git_series import commit_files, format_patch, git

ROOT = Path(__file__).resolve().parents[1]
SPLIT = ROOT / "fixtures" / "checks" / "queue" / "split_driver"
STOP = "\tif (--rp->free == 0)\n\t\tnetif_stop_queue(dev);\n"


def _driver_series(tmp_path: Path, wake: bool) -> tuple[Path, Path]:
    """(repository, mbox): a tree with the split driver, its xmit not yet stopping; one patch adds
    the stop. With `wake` False the sibling file's completion wakes nothing."""
    repo = tmp_path / "linux"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    files = {"Kbuild": b"obj-y += drivers/\n", "MAINTAINERS": b""}
    for name in ("robin.h", "robin_main.c", "robin_tx.c"):
        text = (SPLIT / name).read_text()
        if name == "robin_main.c":
            assert STOP in text
            text = text.replace(STOP, "\trp->free--;\n")
        if name == "robin_tx.c" and not wake:
            text = text.replace("netif_wake_queue(rp->dev);", "rp->free++;")
        files[f"drivers/net/robin/{name}"] = text.encode()
    base = commit_files(repo, None, files, "robin: a driver split over two files", ref="refs/heads/master")
    git(repo, "checkout", "-q", "master")   # the files on disk, as in a user's tree
    main = (SPLIT / "robin_main.c").read_bytes()
    tip = commit_files(repo, base, {"drivers/net/robin/robin_main.c": main},
                       "robin: stop the queue when the ring is full\n\nSigned-off-by: Ada Series <ada@example.org>")
    mails = format_patch(repo, base, tip, tmp_path / "mails")
    mbox = tmp_path / "series.mbox"
    mbox.write_bytes(b"".join(path.read_bytes() for path in mails))
    return repo, mbox


def _timeless(report):
    """The JSON report without the time each stage took (the one thing allowed to differ)."""
    if isinstance(report, dict):
        return {key: _timeless(value) for key, value in report.items() if key != "seconds"}
    if isinstance(report, list):
        return [_timeless(value) for value in report]
    return report


def _check(repo: Path, mbox: Path, cwd: Path, cache: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHBENCH_CACHE": str(cache),
           "PATCHBENCH_INDEX_CACHE": str(cache.parent / "index")}
    proc = subprocess.run([sys.executable, "-m", "patchbench", "check", "--checks", "rules", "--format", "json",
                           "--tree", str(repo), str(mbox)], cwd=cwd, capture_output=True, env=env, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr.decode()
    return json.dumps(_timeless(json.loads(proc.stdout)), indent=1)


@pytest.mark.parametrize("wake", [True, False], ids=["sibling-wakes", "nothing-wakes"])
def test_check_output_is_the_same_from_any_directory_cold_or_warm(tmp_path, wake):
    repo, mbox = _driver_series(tmp_path, wake)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    places = [repo, repo / "drivers" / "net" / "robin", elsewhere]
    outputs = {}
    for cold in (True, False):        # the first round fills each cache, the second reads it back
        for number, cwd in enumerate(places):
            outputs[(str(cwd), cold)] = _check(repo, mbox, cwd, tmp_path / f"cache-{number}")
    first = next(iter(outputs.values()))
    assert all(output == first for output in outputs.values()), outputs
    found = [f["rule"] for f in json.loads(first)["findings"]]
    assert found == ([] if wake else ["queue-stop-unmatched"]), first
