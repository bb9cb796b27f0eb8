"""`patchbench hook install|uninstall [--repo DIR]`, `patchbench hook sendemail-validate FILE`:
the pre-send gate inside git send-email.

`install` puts a small `sendemail-validate` script into the repository's hooks directory (where git
looks for it: `core.hooksPath` when set). A hook that was there is kept, renamed
`sendemail-validate.patchbench-saved`, and still runs first; `uninstall` puts it back.

git send-email runs the hook once per outgoing file. Since git 2.41 it also says which file of how
many (GIT_SENDEMAIL_FILE_COUNTER/_TOTAL): the files are then kept under the git directory and the
series is checked once, at the last one. Without the counters each patch is judged on top of the
patches before it (from HEAD's commits, else the send's other files beside it); the first file's
check judges the later files beside it too and records their outcomes, which their runs replay.
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
    mail = Path(args.file)
    try:
        counted = outgoing.counters()
        if not counted and (replayed := outgoing.replay(repo, mail)):
            return _show(replayed)   # judged ahead, with an earlier file of this send
        source = outgoing.collect(repo, mail, *counted) if counted else mail
    except BadInput as exc:
        return not_checked(str(exc), repo)
    if source is None:
        return 0        # not the last file of the send: the series is checked at the last one
    try:
        return _judge(repo, str(source), beside=mail.resolve().parent, ahead=not counted)
    finally:
        if counted:
            shutil.rmtree(source, ignore_errors=True)


def _show(outcome: outgoing.Outcome) -> int:
    print(outcome.out, end="")
    print(outcome.err, end="", file=sys.stderr)
    return outcome.code


def not_checked(reason: str, repo: Path) -> int:
    """Our own failure: one line; it blocks the send only under patchbench.presend.strict."""
    from patchbench import presend

    if presend.strict_configured(repo):
        print(f"patchbench: error: {reason}; send refused (patchbench.presend.strict; "
              f"{BYPASS} sends anyway)", file=sys.stderr)
        return 2
    print(f"patchbench: error: {reason}; not checked, the send goes ahead", file=sys.stderr)
    return 0


def _judge(repo: Path, source: str, beside: Path, ahead: bool) -> int:
    """Check the outgoing mail(s) at `source`; `beside`: where the send's other files are; `ahead`:
    judge those after it too and record their outcomes for their own hook runs."""
    if outgoing.is_cover_letter(source):
        return 0          # nothing to check in it (a collected send's directory never is one)
    from patchbench import presend

    try:
        settings = presend.read_settings(repo)
        series = presend.load_outgoing(source)
        verdict = presend.check_outgoing(repo, series, settings, beside=beside, ahead=ahead,
                                         progress=lambda line: print(line, file=sys.stderr, flush=True))
    except presend.NotChecked as exc:
        return not_checked(str(exc), repo)
    own = {p.index for p in series.patches}
    now = _outcome(verdict.only(own), settings, series.total)
    later = sorted(verdict.stack.outgoing - own)
    if later and now.code == 0:   # a refusal stops git send-email: no later file is validated
        files = _files_of(beside, verdict.stack.series, later)
        outgoing.record(repo, {files[n]: _outcome(verdict.only({n}), settings, series.total)
                               for n in later if n in files})
    return _show(now)


def _outcome(verdict, settings, total: int) -> outgoing.Outcome:
    """What the hook says of `verdict`: the findings (stdout), what was applied under them and
    whether the send may go (stderr), and the exit code."""
    from patchbench import presend

    out = "".join(f"{line}\n" for line, _ in verdict.terse_lines())
    err = []
    stack = verdict.stack
    if stack.missing:
        err.append(f"patchbench: {stack.without()} (not in HEAD's last {presend.HISTORY_SEARCHED} commits, not "
                   f"among the files beside it): findings they may resolve do not block")
    patches = ", ".join(f"{n}/{total}" for n in sorted({f.patch for f in verdict.blocking}
                                                       | {j.patch for j in verdict.blocking_jobs}))
    checked = f"{len(verdict.applied.applied)} patch{'es' * (len(verdict.applied.applied) != 1)}"
    if verdict.refused:
        what = (f"{len(verdict.blocking)} new finding{'s' * (len(verdict.blocking) != 1)}" if verdict.blocking
                else "the build")
        err.append(f"patchbench: send refused: {what} of severity {settings.block} or worse in patch {patches}; "
                   f"fix it, or send anyway with {BYPASS}")
        return outgoing.Outcome(1, out, "".join(f"{line}\n" for line in err))
    noted = f" ({len(verdict.findings)} non-blocking finding{'s' * (len(verdict.findings) != 1)} above)" \
        if verdict.findings else ""
    on_top = f" {stack.on_top()}," if stack.earlier else ""
    err.append(f"patchbench: {checked} checked{on_top} on {verdict.applied.base[:12]} ({verdict.base_reason}): "
               f"nothing blocks the send{noted}")
    return outgoing.Outcome(0, out, "".join(f"{line}\n" for line in err))


def _files_of(directory: Path, series, indexes: list[int]) -> dict[int, Path]:
    """The files in `directory` that hold patches `indexes` of `series` (one patch each)."""
    from patchbench.mail.sources import directory_files
    from patchbench.series import load_series

    wanted = {p.index: p.patch_id for p in series.patches if p.index in indexes}
    found = {}
    for path in directory_files(directory):
        try:
            one = load_series(str(path))
        except BadInput:
            continue
        (patch, *more) = one.patches
        if not more and (one.version, one.total) == (series.version, series.total) \
                and wanted.get(patch.index, "") == patch.patch_id:
            found[patch.index] = path
    return found
