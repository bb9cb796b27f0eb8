"""What the build checks (build-32bit, build-clang, build-tools) share: patchbench/dispatch's build slots,
its Kbuild driver and warning identities, run here for one check at a time.

The slots are dispatch's own (keyed by repository, base, config and make variables, with their ccache),
so a second `check` of the same base finds them warm. The checks run side by side in threads; their
builds take turns (two makes on the same cores only thrash). The build logs stay under the cache's
logs/ directory, named in any error.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.dispatch import build, changes, workspace
from patchbench.dispatch.build import Context, JobFailed
from patchbench.dispatch.jobs import JobResult, ObjectsJob, Target
from patchbench.dispatch.kconfig import NETDEV_FRAGMENT, KernelConfig
from patchbench.dispatch.progress import PlainProgress
from patchbench.dispatch.warnings import Diagnostic
from patchbench.errors import BadInput
from patchbench.patchchecks.context import PatchContext, Skip, message_finding, netdev_facts

BUILD_TURNS = threading.Lock()


def build_context() -> Context:
    """Where dispatch keeps slots and logs; progress on stderr, as `build` prints it."""
    cache = workspace.cache_root()
    return Context(cache=cache, logs=cache / "logs" / f"patchchecks-{time.strftime('%Y%m%dT%H%M%S')}",
                   progress=PlainProgress(sys.stderr), jobs=os.cpu_count() or 2)


def require_sandbox() -> None:
    """The series is untrusted: its builds run under bubblewrap, as dispatch's do."""
    if shutil.which("bwrap") is None:
        raise Skip("bubblewrap (bwrap) is not installed; it sandboxes the builds (Debian: bubblewrap)")


def facts(check_id: str) -> dict:
    return netdev_facts()["builds"][check_id]


def config_for(check_id: str, scratch: Path) -> KernelConfig:
    """dispatch's netdev config, then the check's own lines (written into the scratch directory:
    only their text keys the build directory)."""
    lines = facts(check_id)["config"]
    if not lines:
        return KernelConfig()
    fragment = scratch / f"{check_id}.config"
    fragment.write_text("\n".join(lines) + "\n")
    return KernelConfig(fragments=(NETDEV_FRAGMENT, fragment), name=f"netdev-{check_id}")


def compiles_anything(path: str) -> bool:
    """Whether a touched path can give the objects build something to compile or re-read."""
    if path.startswith(build.SKIPPED_TOP_DIRS):
        return False
    return path.endswith((*build.COMPILED_SUFFIXES, ".h")) or changes.is_build_rules(path) or changes.is_kconfig(path)


def diagnostic_finding(check_id: str, diagnostic: Diagnostic, patch: int, where: str = "") -> Finding:
    flag = f" [{diagnostic.flag}]" if diagnostic.flag else ""
    return Finding(rule=check_id, severity="error" if diagnostic.kind == "error" else "warning",
                   file=diagnostic.file, line=diagnostic.line, function=diagnostic.function,
                   message=f"{where}{diagnostic.message}{flag}", patch=patch)


def failed(check_id: str, error: JobFailed) -> BadInput:
    """A build that could not be set up (configure, headers): an error of the run, never a pass."""
    return BadInput(f"{check_id}: {error.reason}" + (f" (log: {error.log})" if error.log else ""))


def objects_findings(context: PatchContext, check_id: str, make_vars: dict[str, str]) -> list[Finding]:
    """Each patch's touched objects compiled before and after it in the check's configuration; the
    warnings and errors new by identity (dispatch's run_objects), and what no longer builds."""
    require_sandbox()
    patches = [p for p in context.applied.applied if any(compiles_anything(path) for path in p.files)]
    if not patches:
        return []
    target = Target(context.applied.repo, context.applied.base, config_for(check_id, context.scratch),
                    tuple(sorted(make_vars.items())))
    ctx = build_context()
    found: list[Finding] = []
    with BUILD_TURNS:
        for patch in patches:
            ctx.progress.start("objects", patch.index, patch.commit)
            try:
                result = build.run_objects(ObjectsJob(target, patch.index, patch.parent, patch.commit,
                                                      tuple(patch.files)), ctx)
            except JobFailed as error:
                if error.status == "error":
                    raise failed(check_id, error) from None
                found.append(message_finding(check_id, "error", error.reason, patch.index))
                continue
            ctx.progress.finish(result.status, result.reason, result.seconds)
            found += result_findings(check_id, result, patch.index)
    return found


def result_findings(check_id: str, result: JobResult, patch: int) -> list[Finding]:
    """A build's new diagnostics; a failure without any (an object gone without a compiler error, a
    Makefile that no longer parses) as one finding with dispatch's reason."""
    found = [diagnostic_finding(check_id, d, patch) for d in result.new_warnings]
    if result.status == "fail" and not found:
        found.append(message_finding(check_id, "error", result.reason, patch))
    return found
