"""Run one patchwork series through the pipeline `check` and `run` use, and say what to post.

mbox → load_series → apply_series (base as `apply` picks it, or the project's branch for the tree
named in the subject) → check_applied → (build, boot: the dispatch of `run`). The outcome is plain
JSON-able data: what the pages, the checks and the mails are made from, and what the state store
keeps. One check per patch per stage, context `patchbench-<stage>` (the netdev stage: one per
check, `patchbench-netdev-<check>`); series-level results (applying, booting the head, an
incomplete series) go on every patch.
"""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from patchbench.checks.run.series import check_applied
from patchbench.dispatch.console import clean_line, splats
from patchbench.errors import BadInput
from patchbench.series import load_series
from patchbench.tree import ApplyResult, apply_series
from patchbench.tree.git import BlobReader, Git, open_repository

log = logging.getLogger("patchbench.bot")

STAGES = ("check", "netdev", "build", "boot")
EXCERPT_LINES = 40


@dataclass
class Project:
    """How one patchwork project is tested (the bot's per-project configuration)."""

    name: str
    trees: dict[str, str] = field(default_factory=dict)   # tree named in a subject -> base revision
    stages: tuple[str, ...] = ("check",)
    wait_incomplete: float = 3600.0   # seconds an incomplete series is waited for
    mail: bool = False                # reply on the list to failures
    mail_to: list[str] = field(default_factory=list)   # extra recipients (the list) besides the author
    build_options: dict = field(default_factory=dict)  # `run`'s dispatch options (timeouts, cache, config)


def context(stage: str) -> str:
    return f"patchbench-{stage}"


def series_meta(series: dict) -> dict:
    """The parts of a patchwork series the outcome keeps: ids, names, message-ids, links."""
    cover = series.get("cover_letter") or None
    return {
        "id": series["id"], "name": series.get("name") or "", "version": series.get("version") or 1,
        "web_url": series.get("web_url"), "total": series.get("total"),
        "submitter": series.get("submitter") or {},
        "cover": {"id": cover["id"], "msgid": cover["msgid"], "name": cover.get("name", "")} if cover else None,
        "patches": [{"id": p["id"], "msgid": p["msgid"], "name": p.get("name", ""), "web_url": p.get("web_url")}
                    for p in series.get("patches", [])],
    }


def incomplete_outcome(series: dict) -> dict:
    meta = series_meta(series)
    received, total = len(meta["patches"]), series.get("total") or len(meta["patches"])
    text = f"incomplete series: {received} of {total} patches received; not tested"
    return {**meta, "status": "incomplete",
            "results": [_result("apply", None, "warning", text)]}


def failed_outcome(series: dict, exc: Exception) -> dict:
    """patchbench itself failed on the series: said on every patch, as a warning (not the author's fault)."""
    return _not_tested(series_meta(series), f"patchbench failed ({type(exc).__name__}: {exc}); the operator is told")


def _not_tested(meta: dict, why: str) -> dict:
    return {**meta, "status": "error", "results": [_result("apply", None, "warning", _one_line(f"not tested: {why}"))]}


def run_series(series: dict, mbox: bytes, tree: Path, project: Project) -> dict:
    """The outcome of testing patchwork series `series` (its mbox downloaded) on `tree`."""
    meta = series_meta(series)
    with tempfile.TemporaryDirectory(prefix="patchbench-bot-") as scratch:
        path = Path(scratch) / "series.mbox"
        path.write_bytes(mbox)
        try:
            loaded = load_series(str(path))
            base = project.trees.get(loaded.tree) if loaded.tree else None
            applied = apply_series(loaded, tree, base)
        except BadInput as exc:   # e.g. no patch in the mbox, an unsafe path in a diff
            return _not_tested(meta, str(exc))
    by_index = _patch_ids(meta, loaded)
    total = len(loaded.patches)
    onto = f"{loaded.tree} at {applied.base[:12]}" if base else applied.base[:12]
    reason = f"{loaded.tree} is {base} in the bot's configuration" if base else applied.base_reason
    outcome = {**meta, "status": "applied", "tree": loaded.tree, "base": applied.base,
               "base_reason": reason, "ref": applied.ref, "results": []}
    results = outcome["results"]
    if applied.failed:
        failed = applied.failed
        where = ", ".join(part for part in (failed.file, failed.hunk) if part)
        results.append(_result("apply", None, "fail", _one_line(
            f"patch {failed.index}/{total} does not apply to {onto}" + (f": {where}" if where else "")),
            failed_patch=failed.index, reason=failed.reason))
        outcome["status"] = "apply-failed"
        return outcome
    results.append(_result("apply", None, "success", _one_line(f"applied to {onto} ({reason})")))
    if "check" in project.stages:
        results += _static_results(applied, project, by_index)
    if "netdev" in project.stages:
        results += _netdev_results(loaded, applied, by_index)
    if ("build" in project.stages or "boot" in project.stages) and applied.applied:
        results += _dispatch_results(applied, project, by_index)
    return outcome


def _patch_ids(meta: dict, loaded) -> dict[int, int]:
    """Patch index in the series -> patchwork patch id, matched by Message-Id (else by position)."""
    by_msgid = {p["msgid"].strip("<>"): p["id"] for p in meta["patches"]}
    ids = {}
    for position, patch in enumerate(loaded.patches):
        found = by_msgid.get(patch.message_id.strip("<>"))
        if found is None and position < len(meta["patches"]):
            found = meta["patches"][position]["id"]
        ids[patch.index] = found
    return ids


def _result(stage: str, patch: int | None, state: str, description: str, **details) -> dict:
    return {"stage": stage, "patch": patch, "state": state, "description": description, **details}


def _one_line(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _static_results(applied: ApplyResult, project: Project, by_index: dict[int, int]) -> list[dict]:
    if _options(project)["runner"] == "celery":   # a job per patch on the farm, collected as they come
        from patchbench.commands.build import check_on_runner

        checked = check_on_runner(applied, SimpleNamespace(**_options(project)))
    else:
        # In-process: a series touches a few files, and a long-running daemon should not fork a pool
        # per series (a fork from a process that has run earlier pools hung here once, in a worker's futex).
        checked = check_applied(applied, jobs=1)
    with Git(open_repository(applied.repo)).blobs() as blobs:
        return [_findings_result("check", by_index[patch.index], patch.index, patch.commit, patch.new, blobs,
                                 f"no new findings in {len(patch.files)} C file(s)")
                for patch in checked.patches]


def _netdev_results(loaded, applied: ApplyResult, by_index: dict[int, int]) -> list[dict]:
    """netdev's per-patch checks that do not build (patchchecks' `netdev` group: checkpatch, the
    tags, kdoc, the linters, ...), each on each patch: context patchbench-netdev-<check>. They read
    the applied commits here, on the bot's machine, also when the other stages run on a farm (each
    takes seconds). A check skipped for want of a tool or a script of the tree is not posted."""
    from patchbench import patchchecks   # only for a project with the stage: its checks' imports

    _, check_ids = patchchecks.select(patchchecks.NETDEV_GROUP, [])
    results = []
    with Git(open_repository(applied.repo)).blobs() as blobs:
        for run in patchchecks.check_series(loaded, applied, check_ids, patchchecks.Options()):
            if run.status != "ran":
                log.info("netdev check %s skipped: %s", run.id, run.reason)
                continue
            for patch in applied.applied:
                found = [f for f in run.findings if f.patch == patch.index]
                results.append(_findings_result(f"netdev-{run.id}", by_index[patch.index], patch.index, patch.commit,
                                                found, blobs, "no new findings"))
    return results


def _findings_result(stage: str, patch_id: int, index: int, commit: str, found: list, blobs: BlobReader,
                     clean: str) -> dict:
    """One patch's check from its new findings: fail where one is an error, warning where there
    are others, else success with `clean`."""
    findings = [{"rule": f.rule, "severity": f.severity, "file": f.file, "line": f.line,
                 "function": f.function, "message": f.message,
                 "code": _line_of(blobs, commit, f.file, f.line) if f.file else ""} for f in found]
    if not findings:
        return _result(stage, patch_id, "success", clean, index=index, commit=commit, findings=[])
    state = "fail" if any(f["severity"] == "error" for f in findings) else "warning"
    first = findings[0]
    where = f" at {first['file']}:{first['line']}" if first["file"] else f": {first['message']}"
    return _result(stage, patch_id, state, _one_line(f"{len(findings)} new finding(s); first: {first['rule']}{where}"),
                   index=index, commit=commit, findings=findings)


def _line_of(blobs: BlobReader, commit: str, path: str, line: int) -> str:
    data = blobs.read(f"{commit}:{path}")
    lines = data.decode("utf-8", "replace").splitlines() if data else []
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _options(project: Project) -> dict:
    """`run`'s dispatch options from the project's build table (TOML gives strings for paths)."""
    options = {"config": [], "sparse": False, "no_sandbox": False, "build_timeout": 3600.0,
               "boot_timeout": 60.0, "cache": None, "results": None, "logs": None, "runner": "local",
               "broker": None, "tree_url": None, **project.build_options}
    options["config"] = [Path(fragment) for fragment in options["config"]]
    for key in ("cache", "results", "logs"):
        options[key] = Path(options[key]) if options[key] else None
    return options


def _dispatch_results(applied: ApplyResult, project: Project, by_index: dict[int, int]) -> list[dict]:
    from patchbench.commands.build import dispatch   # the same jobs `run --build --boot` runs

    boot = "boot" in project.stages
    jobs = dispatch(applied, SimpleNamespace(**_options(project)), objects="build" in project.stages,
                    kernel=boot, boot=boot)
    results = []
    for job in jobs:
        if job.kind == "build" and job.scope == "objects" and job.patch is not None:
            warnings = [{"file": d.file, "line": d.line, "function": d.function, "message": d.message,
                         "flag": d.flag, "kind": d.kind} for d in job.new_warnings]
            state = {"pass": "warning" if warnings else "success"}.get(job.status, "fail")
            text = (f"build {job.status}" + (f": {job.reason}" if job.reason else "")
                    + (f"; {len(warnings)} new W=1 warning(s)" if warnings else "; no new warnings"))
            results.append(_result("build", by_index[job.patch], state, _one_line(text),
                                   index=job.patch, warnings=warnings, **_ran_on(job)))
        elif job.kind == "boot":
            state = "success" if job.status == "pass" else "fail"
            text = f"boot {job.status}" + (f": {job.reason}" if job.reason else "") \
                + (f" ({job.fingerprint})" if job.fingerprint else "")
            results.append(_result("boot", None, state, _one_line(text),
                                   excerpt=boot_excerpt(Path(job.log)) if job.log else "", **_ran_on(job)))
    return results


def _ran_on(job) -> dict:
    """The farm worker that ran a job, for the pages: not in the check's description, which must not depend
    on which worker took the job (the same series posts the same checks, on the farm or not)."""
    return {"worker": job.worker} if job.worker else {}


def boot_excerpt(console: Path) -> str:
    """The console from the first splat on (or its last lines when there is none)."""
    try:
        text = console.read_text(errors="replace")
    except OSError:
        return ""
    lines = [clean_line(line) for line in text.splitlines()]
    found = splats(text)
    start = max(len(lines) - EXCERPT_LINES, 0)
    if found:
        start = next((n for n, line in enumerate(lines) if line.strip() == found[0].title), start)
    return "\n".join(lines[start:start + EXCERPT_LINES])


def checks_of(outcome: dict) -> list[tuple[int, str, str, str]]:
    """(patch id, context, state, description) of each check the outcome asks for: series-level
    results on every patch of the series."""
    every = [p["id"] for p in outcome["patches"]]
    checks = []
    for result in outcome["results"]:
        for patch in every if result["patch"] is None else [result["patch"]]:
            checks.append((patch, context(result["stage"]), result["state"], result["description"]))
    return checks
