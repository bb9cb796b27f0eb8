"""`patchbench worker --check`: whether this machine can serve a farm, before it takes a job.

Each probe is quick and bounded (a Redis ping, `git ls-remote` of the tree with a timeout, lookups
on PATH); none builds or boots. Boot readiness is informative: a worker without QEMU simply does not
subscribe to the boot queues.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from patchbench.tree.git import Git, GitFailed

BUILD_TOOLS = ("git", "make", "gcc", "ccache", "flex", "bison", "bc", "bwrap")
BOOT_TOOLS = ("qemu-system-x86_64", "busybox")
DISK_NEEDED = 20 * 2**30           # a configured build directory, its ccache and a mirror of one tree
PROBE_TIMEOUT = 10.0


@dataclass
class Probe:
    name: str
    ok: bool
    detail: str
    required: bool = True          # a failed optional probe leaves the worker ready, with less to do

    def line(self) -> str:
        mark = "ok" if self.ok else ("FAIL" if self.required else "warn")
        return f"{mark:5} {self.name}: {self.detail}"


def probe_all(broker: str, tree_urls: list[str], cache: Path) -> list[Probe]:
    return [broker_probe(broker), tools_probe("build tools", BUILD_TOOLS, True),
            tools_probe("boot tools", BOOT_TOOLS, False), accel_probe(), disk_probe(cache),
            *(tree_probe(url) for url in tree_urls)]


def broker_probe(broker: str) -> Probe:
    started = time.monotonic()
    try:
        redis.Redis.from_url(broker, socket_connect_timeout=PROBE_TIMEOUT, socket_timeout=PROBE_TIMEOUT).ping()
    except (redis.RedisError, OSError, ValueError) as exc:
        return Probe("broker", False, f"{broker}: {exc}")
    return Probe("broker", True, f"{broker} answers ({1000 * (time.monotonic() - started):.1f} ms)")


def tools_probe(name: str, tools: tuple[str, ...], required: bool) -> Probe:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if missing:
        consequence = "" if required else " (this worker takes no boot jobs)"
        return Probe(name, False, f"missing: {' '.join(missing)}{consequence}", required)
    return Probe(name, True, " ".join(tools), required)


def accel_probe() -> Probe:
    """KVM when /dev/kvm is usable (the first boot still proves it with a probe boot), else TCG."""
    if os.access("/dev/kvm", os.R_OK | os.W_OK):
        return Probe("accel", True, "kvm (/dev/kvm usable; the first boot job confirms it)", False)
    return Probe("accel", True, "tcg (/dev/kvm not usable: boots are emulated, several times slower)", False)


def disk_probe(cache: Path) -> Probe:
    existing = next(p for p in (cache, *cache.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    detail = f"{free / 2**30:.0f} GiB free under {cache} (a build directory, its ccache and a mirror: ~20 GiB)"
    return Probe("disk", free >= DISK_NEEDED, detail)


def tree_probe(url: str) -> Probe:
    try:
        _, out, _ = Git.at(Path.cwd()).run("ls-remote", "--heads", "--tags", url, timeout=PROBE_TIMEOUT)
    except GitFailed as failed:
        last = (failed.stderr.strip().splitlines() or ["failed"])[-1]
        return Probe("tree", False, f"{url}: {last}")
    return Probe("tree", True, f"{url} answers ({len(out.splitlines())} branches and tags)")
