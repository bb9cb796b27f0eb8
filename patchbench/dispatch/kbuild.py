"""Drive Kbuild in one cached build slot: configure once, then make targets, sandboxed and timed."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from patchbench.dispatch import sandbox
from patchbench.dispatch.kconfig import ConfigCheck, KernelConfig, check_dotconfig, read_dotconfig
from patchbench.dispatch.workspace import Slot

# Fixed so that rebuilding the same source gives the same objects (and ccache hits on init/version.o).
# Kbuild unexports LC_ALL, so the C locale (ASCII quotes in diagnostics) is asked for by LANG and LC_*.
REPRODUCIBLE_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "1970-01-01", "KBUILD_BUILD_USER": "patchbench",
    "KBUILD_BUILD_HOST": "patchbench", "LC_ALL": "C", "LANG": "C", "LC_CTYPE": "C", "LC_MESSAGES": "C",
}
DEFAULT_MAKE_VARS = {"ARCH": "x86_64", "CC": "ccache gcc", "W": "1"}


@dataclass
class Kbuild:
    slot: Slot
    make_vars: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_MAKE_VARS))
    jobs: int = 2
    sandboxed: bool = True

    def make(self, targets: list[str], *, log: Path, timeout: float, diagnostics: bool = False,
             subdir: str = "", output: Path | None = None,
             on_line: sandbox.LineSink | None = None) -> sandbox.Completed:
        """Make `targets` (in `subdir` of the source, e.g. the selftests; into `output`, a directory under
        the slot's O= one, instead of O= itself); with `diagnostics`, keep going past errors and keep each
        object's output together (-Otarget), so that "In function" lines stay with their warnings."""
        argv = ["make", "-C", str(self.slot.src / subdir), f"O={output or self.slot.obj}", f"-j{self.jobs}",
                *(["-k", "-Otarget"] if diagnostics else []),
                *(f"{k}={v}" for k, v in self.make_vars.items()), *targets]
        return self._run(argv, log=log, timeout=timeout, on_line=on_line)

    def _run(self, argv: list[str], *, log: Path, timeout: float,
             on_line: sandbox.LineSink | None) -> sandbox.Completed:
        env = {**REPRODUCIBLE_ENV, "CCACHE_DIR": str(self.slot.ccache), "CCACHE_MAXSIZE": "2G"}
        writable = [self.slot.obj, self.slot.ccache] if self.sandboxed else None
        # the worktree and the repository its .git names may sit under /tmp, which the sandbox replaces
        return sandbox.run(argv, timeout=timeout, log=log, cwd=self.slot.obj, env=env, sandbox=writable,
                           readable=[self.slot.src, self.slot.repo], on_line=on_line)

    def _carried_fragments(self, config: KernelConfig) -> list[Path]:
        """Copies of the config fragments in the build directory: the sandbox sees no host /tmp, and the
        package (our netdev.config) or the user's fragments may be installed or kept there."""
        carried = self.slot.obj / ".patchbench-fragments"
        shutil.rmtree(carried, ignore_errors=True)
        carried.mkdir()
        copies = []
        for number, fragment in enumerate(config.fragments):
            copies.append(carried / f"{number:02}-{fragment.name}")
            shutil.copyfile(fragment, copies[-1])
        return copies

    @property
    def configured_stamp(self) -> Path:
        return self.slot.obj / ".patchbench-configured"

    def enable(self, symbols: list[str], *, log: Path, timeout: float,
               on_line: sandbox.LineSink | None = None) -> tuple[sandbox.Completed | None, dict[str, str]]:
        """Turn `symbols` on in the configured tree and let Kconfig settle (olddefconfig, which also
        re-reads every Kconfig file); the failed step or None, and the value each symbol got."""
        dotconfig = self.slot.obj / ".config"
        if symbols:
            switches = [arg for symbol in symbols for arg in ("--enable", symbol.removeprefix("CONFIG_"))]
            done = self._run([str(self.slot.src / "scripts/config"), "--file", str(dotconfig), *switches],
                             log=log, timeout=timeout, on_line=on_line)
            if done.returncode != 0:
                return done, {}
        done = self.make(["olddefconfig"], log=log, timeout=timeout, on_line=on_line)
        if done.returncode != 0:
            return done, {}
        got = read_dotconfig(dotconfig)
        return None, {symbol: got.get(symbol, "n") for symbol in symbols}

    def configure(self, config: KernelConfig, *, log: Path, timeout: float,
                  on_line: sandbox.LineSink | None = None) -> tuple[sandbox.Completed | None, ConfigCheck]:
        """tinyconfig, merge the fragments, olddefconfig; once per build directory.

        Returns the failed step (or None) and the requested options Kconfig did not keep.
        """
        dotconfig = self.slot.obj / ".config"
        if self.configured_stamp.exists() and dotconfig.exists():
            return None, check_dotconfig(dotconfig, config.requested())
        done = self.make(["tinyconfig"], log=log, timeout=timeout, on_line=on_line)
        if done.returncode != 0:
            return done, ConfigCheck()
        merge = [str(self.slot.src / "scripts/kconfig/merge_config.sh"), "-m", "-O", str(self.slot.obj),
                 str(dotconfig), *(str(self.slot.src / p) for p in config.in_tree),
                 *map(str, self._carried_fragments(config))]
        done = self._run(merge, log=log, timeout=timeout, on_line=on_line)
        if done.returncode != 0:
            return done, ConfigCheck()
        done = self.make(["olddefconfig"], log=log, timeout=timeout, on_line=on_line)
        if done.returncode != 0:
            return done, ConfigCheck()
        self.configured_stamp.write_text(os.environ.get("USER", "") + "\n")
        return None, check_dotconfig(dotconfig, config.requested())
