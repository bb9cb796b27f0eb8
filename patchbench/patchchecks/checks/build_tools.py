"""build-tools: the selftests and tools a patch touches still build, with no new warnings.

A touched file under tools/testing/selftests is built as the kselftest target of the nearest directory
holding a Makefile (`make -C tools/testing/selftests TARGETS=net/af_unix`, after `make headers`, as
dispatch builds kselftests for a boot); one elsewhere under tools/ by `make -C` in the nearest
directory below tools/ holding a Makefile (tools/net/ynl, tools/lib/bpf), into a directory of its own.
Only the touched directories are built, each from scratch (an up-to-date program prints no
warnings), before the patch and after it, in dispatch's warm netdev build slot (sandboxed, ccache).
A warning or error is new by identity (file, function, flag, text without numbers); a directory that
built before and fails after is reported with make's first error line. Paths in netdev.toml's
[build-tools] `never` are not built.
"""

from __future__ import annotations

import dataclasses
import posixpath
import shutil
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.dispatch import warnings
from patchbench.dispatch.build import JobFailed, configured, make_failures
from patchbench.dispatch.jobs import Target
from patchbench.dispatch.kbuild import Kbuild
from patchbench.patchchecks.builds import (BUILD_TURNS, build_context, diagnostic_finding, failed,
                                           require_sandbox)
from patchbench.patchchecks.context import PatchContext, message_finding, netdev_facts

ID = "build-tools"
MESSAGE = "the selftests and tools/ directories a patch touches: still build, no new warnings"
NEEDS = ("tools/",)
GROUP = "builds"
TIMEOUT = 900.0      # seconds for one directory's build; the same bound as an objects build


@dataclasses.dataclass(frozen=True)
class ToolDir:
    """A directory to build: a kselftest target, or a directory under tools/ made by itself."""
    path: str                      # in the tree, e.g. tools/testing/selftests/net/af_unix
    selftest: str = ""             # its TARGETS= name when it is a kselftest target


def facts() -> dict:
    return netdev_facts()["build-tools"]


def tool_dirs(context: PatchContext, rev: str, files: list[str]) -> list[ToolDir]:
    """The directories of tools/ that `files` make worth building at `rev`."""
    selftests = facts()["selftests"]
    found: dict[str, ToolDir] = {}
    for path in files:
        if not path.startswith("tools/") or path.startswith(tuple(facts()["never"])):
            continue
        stop = selftests if path.startswith(selftests + "/") else "tools"
        directory = posixpath.dirname(path)
        while directory != stop and directory.startswith(stop + "/"):
            if context.tree.git("ls-tree", "--name-only", rev, "--", f"{directory}/Makefile").strip():
                found[directory] = ToolDir(directory, directory.removeprefix(selftests + "/")
                                           if stop == selftests else "")
                break
            directory = posixpath.dirname(directory)
    return sorted(found.values(), key=lambda d: d.path)


def build_dirs(kbuild: Kbuild, dirs: list[ToolDir], log: Path, ctx) -> tuple[list[warnings.Diagnostic],
                                                                              dict[str, list[str]]]:
    """Build each directory from scratch; the diagnostics (paths made tree-relative) and, per
    directory that failed, make's error lines."""
    if any(d.selftest for d in dirs):
        done = kbuild.make(["headers"], log=log, timeout=TIMEOUT, on_line=ctx.progress.line)
        if done.returncode != 0:
            raise JobFailed("error", "installing the kernel headers for the selftests failed"
                            + (" (timed out)" if done.timed_out else ""), log)
    diagnostics: list[warnings.Diagnostic] = []
    failures: dict[str, list[str]] = {}
    for tool in dirs:
        ctx.progress.stage(f"make {tool.path}")
        if tool.selftest:
            shutil.rmtree(kbuild.slot.obj / "kselftest" / tool.selftest, ignore_errors=True)
            done = kbuild.make([f"TARGETS={tool.selftest}"], subdir=facts()["selftests"], log=log,
                               timeout=TIMEOUT, diagnostics=True, on_line=ctx.progress.line)
        else:
            output = kbuild.slot.obj / "patchbench-tools" / tool.path
            shutil.rmtree(output, ignore_errors=True)
            output.mkdir(parents=True)
            done = kbuild.make([], subdir=tool.path, output=output, log=log, timeout=TIMEOUT, diagnostics=True,
                               on_line=ctx.progress.line)
        if done.timed_out:
            raise JobFailed("fail", f"building {tool.path} timed out after {TIMEOUT:.0f} s", log)
        diagnostics += [_in_tree(d, kbuild.slot.src, tool.path)
                        for d in warnings.parse(done.output, str(kbuild.slot.src))]
        if failures_here := make_failures(done):
            failures[tool.path] = failures_here
    return diagnostics, failures


def _in_tree(diagnostic: warnings.Diagnostic, src: Path, directory: str) -> warnings.Diagnostic:
    """Tools' Makefiles give the compiler paths relative to the directory they run in."""
    if (src / diagnostic.file).exists() or not (src / directory / diagnostic.file).exists():
        return diagnostic
    return dataclasses.replace(diagnostic, file=posixpath.normpath(posixpath.join(directory, diagnostic.file)))


def run(context: PatchContext) -> list[Finding]:
    wanted = [(patch, tool_dirs(context, patch.commit, patch.files)) for patch in context.applied.applied]
    wanted = [(patch, dirs) for patch, dirs in wanted if dirs]
    if not wanted:
        return []
    require_sandbox()
    target = Target(context.applied.repo, context.applied.base)   # dispatch's default: its warm slot
    ctx = build_context()
    found: list[Finding] = []
    with BUILD_TURNS:
        for patch, dirs in wanted:
            ctx.progress.start("objects", patch.index, patch.commit)
            log = ctx.logs / f"build-tools-patch{patch.index}-{patch.commit[:12]}.log"
            try:
                with configured(target, patch.parent, ctx, log, TIMEOUT) as kbuild:
                    before_dirs = [d for d in dirs if (kbuild.slot.src / d.path / "Makefile").exists()]
                    before, failures_before = build_dirs(kbuild, before_dirs, log, ctx)
                    ctx.progress.stage("checkout patch")
                    kbuild.slot.checkout(patch.commit)
                    after, failures_after = build_dirs(kbuild, dirs, log, ctx)
            except JobFailed as error:
                if error.status == "error":
                    raise failed(ID, error) from None
                found.append(message_finding(ID, "error", error.reason, patch.index))
                continue
            new = warnings.new_since(before, after)
            ctx.progress.finish("fail" if new else "pass", f"{len(new)} new diagnostic(s)")
            found += [diagnostic_finding(ID, d, patch.index) for d in new]
            found += [message_finding(ID, "error", f"{path} no longer builds: {lines[0]}", patch.index)
                      for path, lines in failures_after.items() if path not in failures_before
                      and not any(d.kind == "error" for d in new)]
    return found
