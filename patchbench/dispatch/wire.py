"""Jobs and results as JSON, for a runner on another machine (the Celery farm).

Only JSON crosses the broker (never pickle: a broker is shared, and unpickling runs code). A config
fragment travels as its text, not its path: the worker writes it into its own cache, so the build
key (which hashes the text) is the same on both sides. A job's id is a digest of its JSON: the same
job submitted twice, or run twice after a worker died, is stored once. The series' commits travel as
a git bundle, base64 in the JSON (see mirror.Source); a job's log comes back with its result.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import zlib
from pathlib import Path

from patchbench.checks.engine.finding import Finding
from patchbench.dispatch.coverage import FunctionCoverage
from patchbench.dispatch.jobs import BootJob, CheckJob, Job, JobResult, KernelJob, ObjectsJob, Target
from patchbench.dispatch.kconfig import NETDEV_FRAGMENT, KernelConfig
from patchbench.dispatch.kselftest import KselftestResult, Selection
from patchbench.dispatch.mirror import Source
from patchbench.dispatch.warnings import Diagnostic

LOG_LIMIT = 4 * 2**20             # bytes of a job's log sent back from a worker

_JOB_TYPES = {cls.__name__: cls for cls in (ObjectsJob, KernelJob, BootJob, CheckJob)}


def _target_to_dict(target: Target) -> dict:
    return {"repo": str(target.repo), "base": target.base, "sandboxed": target.sandboxed,
            "make_vars": [list(pair) for pair in target.make_vars],
            "config": {"name": target.config.name, "in_tree": list(target.config.in_tree),
                       "fragments": [path.read_text() for path in target.config.fragments]}}


def _fragment_file(text: str, cache: Path) -> Path:
    if text == NETDEV_FRAGMENT.read_text():
        return NETDEV_FRAGMENT
    path = cache / "fragments" / f"{hashlib.sha1(text.encode()).hexdigest()[:16]}.config"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(text)
        partial.replace(path)
    return path


def _target_from_dict(data: dict, cache: Path) -> Target:
    config = data["config"]
    return Target(Path(data["repo"]), data["base"],
                  KernelConfig(tuple(_fragment_file(text, cache) for text in config["fragments"]),
                               tuple(config["in_tree"]), config["name"]),
                  tuple(tuple(pair) for pair in data["make_vars"]), data["sandboxed"])


def job_to_dict(job: Job) -> dict:
    fields = {}
    for field in dataclasses.fields(job):
        value = getattr(job, field.name)
        if isinstance(value, Target):
            value = _target_to_dict(value)
        elif field.name == "kselftests":
            value = [str(selection) for selection in value]
        elif isinstance(value, Path):
            value = str(value)
        elif isinstance(value, tuple):
            value = list(value)
        fields[field.name] = value
    return {"type": type(job).__name__, **fields}


def job_from_dict(data: dict, cache: Path) -> Job:
    data = dict(data)
    cls = _JOB_TYPES[data.pop("type")]
    if "target" in data:
        data["target"] = _target_from_dict(data["target"], cache)
    if "kselftests" in data:
        data["kselftests"] = tuple(Selection.parse(spec) for spec in data["kselftests"])
    for name in ("files", "series_files"):
        if name in data:
            data[name] = tuple(data[name])
    if "patches" in data:
        data["patches"] = tuple(tuple(patch) for patch in data["patches"])
    if cls is CheckJob:
        data["repo"] = Path(data["repo"])
    return cls(**data)


def job_id(job: Job) -> str:
    return hashlib.sha1(json.dumps(job_to_dict(job), sort_keys=True).encode()).hexdigest()[:20]


def result_to_dict(result: JobResult, with_log: bool = False) -> dict:
    """`with_log`: the job's log (build log, boot console) goes along, compressed; its last LOG_LIMIT
    bytes when longer (where a build or a boot failed)."""
    data = dataclasses.asdict(result)
    if with_log and result.log and Path(result.log).is_file():
        with open(result.log, "rb") as log:
            log.seek(max(0, log.seek(0, 2) - LOG_LIMIT))
            data["log_data"] = base64.b64encode(zlib.compress(log.read())).decode()
    return data


def result_from_dict(data: dict, logs: Path | None = None) -> JobResult:
    """A result from JSON; a log that came with it is written under `logs`/<worker>/ and named there."""
    data = dict(data)
    sent = data.pop("log_data", None)
    if sent is not None and logs is not None:
        path = logs / (data["worker"] or "farm") / Path(data["log"]).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(zlib.decompressobj().decompress(base64.b64decode(sent), LOG_LIMIT))
        data["log"] = str(path)
    for name in ("new_warnings", "fixed_warnings"):
        data[name] = [Diagnostic(**d) for d in data[name]]
    data["kselftests"] = [KselftestResult(**k) for k in data["kselftests"]]
    data["coverage"] = [FunctionCoverage(**c) for c in data["coverage"]]
    data["findings"] = [Finding.from_dict(f) for f in data["findings"]]
    return JobResult(**data)


def source_to_dict(source: Source) -> dict:
    return {"url": source.url, "bases": list(source.bases), "bundle": base64.b64encode(source.bundle).decode(),
            "trees": [list(pair) for pair in source.trees]}


def source_from_dict(data: dict) -> Source:
    return Source(data["url"], tuple(data["bases"]), base64.b64decode(data["bundle"]),
                  tuple(tuple(pair) for pair in data["trees"]))
