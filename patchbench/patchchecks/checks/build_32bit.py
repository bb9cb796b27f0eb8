"""build-32bit: the objects a patch touches, compiled for 32-bit x86 (ARCH=i386, W=1) before and after it.

NIPA builds every patch for i386 too: a pointer cast to u64, a size_t printed with %lu, a 64-bit
division are only wrong there. The build is dispatch's objects build (patchbench/dispatch/build.py)
in its own slot: our netdev config with 64BIT off (the [builds.build-32bit] lines of netdev.toml).
Debian 12's gcc compiles the 32-bit kernel with -m32 as it is: the kernel is freestanding and needs
no 32-bit libc (gcc-multilib, libc6-dev-i386 are for 32-bit user space). A warning is new when
its identity (file, function, flag, text without numbers) occurs more often after the patch.
"""

from __future__ import annotations

import shutil

from patchbench.checks.engine.finding import Finding
from patchbench.patchchecks.builds import facts, objects_findings
from patchbench.patchchecks.context import PatchContext, Skip

ID = "build-32bit"
MESSAGE = "the touched objects built for ARCH=i386 (W=1): new warnings and errors"
NEEDS = ("arch/x86/Makefile",)
GROUP = "builds"


def run(context: PatchContext) -> list[Finding]:
    if shutil.which("gcc") is None:
        raise Skip("gcc is not installed (Debian: gcc)")
    return objects_findings(context, ID, dict(facts(ID)["make_vars"]))
