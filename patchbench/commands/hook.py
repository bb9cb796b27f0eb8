"""`patchbench hook install|uninstall [--repo DIR]`, `patchbench hook sendemail-validate FILE`:
the pre-send gate inside git send-email.

`install` puts a small `sendemail-validate` script into the repository's hooks directory (where git
looks for it: `core.hooksPath` when set). A hook that was there is kept, renamed
`sendemail-validate.patchbench-saved`, and still runs first; `uninstall` puts it back.

git send-email runs the hook once per outgoing file. Since git 2.41 it also says which file of how
many (GIT_SENDEMAIL_FILE_COUNTER/_TOTAL): the files are then kept under the git directory and the
series is checked once, at the last one. Without the counters each patch is checked at its own
file, on top of the patches before it (from HEAD's commits, else the send's other files beside it).
A refused send prints the findings (terse format) and how to send anyway (--no-validate).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path

from patchbench import outgoing
from patchbench.errors import BadInput

HOOK = "sendemail-validate"
SAVED = f"{HOOK}.patchbench-saved"
MARK = "# patchbench pre-send gate"
BYPASS = "git send-email --no-validate"


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("hook", help="the pre-send gate in git send-email (install, uninstall, run)",
                                   description=__doc__.split("\n\n")[0])
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, func, text in (("install", install, "install the sendemail-validate hook (keeps an existing one)"),
                             ("uninstall", uninstall, "remove it and restore the hook it replaced")):
        action = actions.add_parser(name, help=text)
        action.add_argument("--repo", metavar="DIR", default=".", help="the kernel git repository (default: .)")
        action.set_defaults(func=func)
    validate = actions.add_parser(HOOK, help="what the hook runs: check an outgoing patch file")
    validate.add_argument("file", metavar="FILE", help="the outgoing mail git send-email names")
    validate.add_argument("headers", metavar="HEADERS", nargs="?", help="SMTP headers file (git >= 2.41; unused)")
    validate.set_defaults(func=sendemail_validate)


# --- install / uninstall ------------------------------------------------------------------------------

def hook_script() -> str:
    """The hook: the kept hook first (its refusal stands), then this Python's patchbench."""
    return f"""#!/bin/sh
{MARK}: `patchbench hook uninstall` removes it and restores a hook it replaced.
saved="$(dirname "$0")/{SAVED}"
if test -x "$saved"; then
	"$saved" "$@" || exit
fi
exec {shlex.quote(sys.executable)} -m patchbench hook {HOOK} "$@"
"""


def hooks_dir(repo: str) -> Path:
    """Where git runs the repository's hooks from: core.hooksPath, else the git dir's hooks/."""
    proc = outgoing.git(Path(repo), "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    if proc.returncode != 0 or not Path(repo).is_dir():
        raise BadInput(f"{repo} is not a git repository")
    return Path(proc.stdout.strip())


def _is_ours(path: Path) -> bool:
    try:
        return MARK in path.read_text(errors="replace")
    except (OSError, UnicodeError):
        return False


def install(args) -> int:
    hooks = hooks_dir(args.repo)
    hook, saved = hooks / HOOK, hooks / SAVED
    script = hook_script()
    present = hook.exists() or hook.is_symlink()
    if present and _is_ours(hook) and hook.read_text() == script and os.access(hook, os.X_OK):
        print(f"patchbench: the pre-send gate is already installed: {hook}")
        return 0
    keep = present and not _is_ours(hook)
    if keep and (saved.exists() or saved.is_symlink()):
        raise BadInput(f"{hook} and {saved} both exist: move one of them away first")
    try:
        hooks.mkdir(parents=True, exist_ok=True)
        _write_executable(hook, script, keep_as=saved if keep else None)
    except OSError as exc:
        raise BadInput(f"{hooks}: cannot install the hook: {exc.strerror}") from None
    kept = f"; it runs the hook that was there first, kept as {saved}" if keep else ""
    print(f"patchbench: installed the pre-send gate: {hook}{kept}")
    return 0


def _write_executable(hook: Path, script: str, keep_as: Path | None) -> None:
    """Write the script beside the hook, then move it in place (after moving the old hook to keep_as)."""
    fd, partial = tempfile.mkstemp(prefix=f".{HOOK}.", dir=hook.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(script)
        os.chmod(partial, 0o755)
        if keep_as is not None:
            hook.rename(keep_as)
        os.replace(partial, hook)
    finally:
        Path(partial).unlink(missing_ok=True)


def uninstall(args) -> int:
    hooks = hooks_dir(args.repo)
    hook, saved = hooks / HOOK, hooks / SAVED
    present = hook.exists() or hook.is_symlink()
    if present and not _is_ours(hook):
        raise BadInput(f"{hook} was not installed by patchbench; left as it is")
    try:
        if present:
            hook.unlink()
        if saved.exists() or saved.is_symlink():
            saved.rename(hook)
    except OSError as exc:
        raise BadInput(f"{hooks}: cannot uninstall the hook: {exc.strerror}") from None
    restored = "; restored the hook it replaced" if hook.exists() else ""
    said = f"removed the pre-send gate: {hook}{restored}" if present else f"no pre-send gate in {hooks}"
    print(f"patchbench: {said}")
    return 0


# --- the hook ------------------------------------------------------------------------------------------

def sendemail_validate(args) -> int:
    repo = Path.cwd()   # git send-email runs its hooks at the top of the work tree
    try:
        counted = outgoing.counters()
        source = outgoing.collect(repo, Path(args.file), *counted) if counted else Path(args.file)
    except BadInput as exc:
        return not_checked(str(exc), repo)
    if source is None:
        return 0        # not the last file of the send: the series is checked at the last one
    try:
        return _judge(repo, str(source), beside=Path(args.file).resolve().parent)
    finally:
        if counted:
            shutil.rmtree(source, ignore_errors=True)


def not_checked(reason: str, repo: Path) -> int:
    """Our own failure: one line; it blocks the send only under patchbench.presend.strict."""
    from patchbench import presend

    if presend.strict_configured(repo):
        print(f"patchbench: error: {reason}; send refused (patchbench.presend.strict; "
              f"{BYPASS} sends anyway)", file=sys.stderr)
        return 2
    print(f"patchbench: error: {reason}; not checked, the send goes ahead", file=sys.stderr)
    return 0


def _judge(repo: Path, source: str, beside: Path) -> int:
    """Check the outgoing mail(s) at `source`; `beside`: where the send's other files are."""
    if outgoing.is_cover_letter(source):
        return 0          # nothing to check in it (a collected send's directory never is one)
    from patchbench import presend

    try:
        settings = presend.read_settings(repo)
        series = presend.load_outgoing(source)
        verdict = presend.check_outgoing(repo, series, settings, beside=beside,
                                         progress=lambda line: print(line, file=sys.stderr, flush=True))
    except presend.NotChecked as exc:
        return not_checked(str(exc), repo)
    for line, _ in verdict.terse_lines():
        print(line)
    stack = verdict.stack
    if stack.missing:
        print(f"patchbench: {stack.without()} (not in HEAD's last {presend.HISTORY_SEARCHED} commits, not among "
              f"the files beside it): findings they may resolve do not block", file=sys.stderr)
    patches = ", ".join(f"{n}/{series.total}" for n in sorted({f.patch for f in verdict.blocking}
                                                              | {j.patch for j in verdict.blocking_jobs}))
    checked = f"{len(verdict.applied.applied)} patch{'es' * (len(verdict.applied.applied) != 1)}"
    if verdict.refused:
        what = (f"{len(verdict.blocking)} new finding{'s' * (len(verdict.blocking) != 1)}" if verdict.blocking
                else "the build")
        print(f"patchbench: send refused: {what} of severity {settings.block} or worse in patch {patches}; "
              f"fix it, or send anyway with {BYPASS}", file=sys.stderr)
        return 1
    noted = f" ({len(verdict.findings)} non-blocking finding{'s' * (len(verdict.findings) != 1)} above)" \
        if verdict.findings else ""
    on_top = f" {stack.on_top()}," if stack.earlier else ""
    print(f"patchbench: {checked} checked{on_top} on {verdict.applied.base[:12]} ({verdict.base_reason}): "
          f"nothing blocks the send{noted}", file=sys.stderr)
    return 0
