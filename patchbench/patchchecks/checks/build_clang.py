"""build-clang: the objects a patch touches, compiled with clang (LLVM=1, W=1) before and after it.

clang warns where gcc is silent (a self-assignment, an enum mixed with another enum, a variable only
ever written, -Wframe-larger-than at other sizes), and NIPA builds every patch with it. The build is
dispatch's objects build in a slot of its own, our netdev config; the compiler is the newest clang
on PATH (`clang` or `clang-N`) that the tree accepts (its scripts/min-tool-version.sh llvm: 7.x wants
17.0.1, more than Debian 12's clang 14, so there clang-19 is needed), with the LLVM tools of the
same suffix (LLVM=1 or LLVM=-N). A warning is new as for build-32bit, by identity.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.builds import facts, objects_findings
from patchbench.patchchecks.context import PatchContext, Skip, run_tool

ID = "build-clang"
MESSAGE = "the touched objects built with clang (LLVM=1, W=1): new warnings and errors"
NEEDS = ("arch/x86/Makefile",)
GROUP = "builds"
MIN_VERSION_SCRIPT = "scripts/min-tool-version.sh"
_SUFFIX = re.compile(r"^clang(-\d+)?$")
_VERSION = re.compile(r"clang version (\d+)\.(\d+)\.(\d+)")
VERSION_TIMEOUT = 30


def installed_clangs() -> dict[str, tuple[int, ...]]:
    """Suffix ("" for `clang`, "-19" for `clang-19`) -> version of each clang on PATH."""
    found: dict[str, tuple[int, ...]] = {}
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            match = _SUFFIX.match(name)
            suffix = match and (match[1] or "")
            if suffix is None or suffix in found or not os.access(Path(directory, name), os.X_OK):
                continue
            try:
                out = subprocess.run([str(Path(directory, name)), "--version"], capture_output=True, text=True,
                                     timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL).stdout
            except (OSError, subprocess.TimeoutExpired):
                continue
            if version := _VERSION.search(out):
                found[suffix] = tuple(map(int, version.groups()))
    return found


def tree_minimum(context: PatchContext) -> tuple[int, ...]:
    """The oldest LLVM the base tree builds with (0 when it does not say)."""
    if not context.tree.exists(MIN_VERSION_SCRIPT):
        return (0,)
    proc = run_tool([*context.tree.command(MIN_VERSION_SCRIPT), "llvm"], MIN_VERSION_SCRIPT,
                    env={**os.environ, "ARCH": "x86_64", "SRCARCH": "x86"})
    return tuple(int(part) for part in re.findall(r"\d+", proc.stdout)[:3]) or (0,)


def llvm_suffix(context: PatchContext) -> str:
    """The suffix of the newest clang the tree accepts whose LLVM tools are all installed."""
    clangs = installed_clangs()
    debian = facts(ID)["debian"]
    if not clangs:
        raise Skip(f"clang is not installed (Debian: {debian})")
    minimum = tree_minimum(context)
    usable = [s for s, v in clangs.items() if v >= minimum
              and all(shutil.which(f"{tool}{s}") for tool in facts(ID)["llvm_tools"])]
    if not usable:
        have = ", ".join(f"clang{s} {'.'.join(map(str, v))}" for s, v in sorted(clangs.items()))
        raise Skip(f"no clang with its LLVM tools at least {'.'.join(map(str, minimum))} (the tree's minimum) "
                   f"is installed: {have} (Debian: {debian})")
    return max(usable, key=lambda s: clangs[s])


def run(context: PatchContext) -> list[Finding]:
    suffix = llvm_suffix(context)
    make_vars = {**facts(ID)["make_vars"], "LLVM": suffix or "1", "CC": f"ccache clang{suffix}"}
    return objects_findings(context, ID, make_vars)
