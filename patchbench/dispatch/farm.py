"""Run jobs on a Celery farm (Redis broker and result backend) instead of this machine.

A maintainer adds machines by starting `patchbench worker --broker redis://…` on them; nothing here
schedules. What the farm adds to the local runner:

- At least once: tasks are acknowledged late and rejected when their worker dies, and Redis makes an
  unacknowledged task visible again after `visibility_timeout`, so a job whose worker was killed
  runs again elsewhere. A result is keyed by the job's id (a digest of its JSON), so a job that ran
  twice is stored once.
- Workers share nothing but the broker: every task carries a mirror.Source (the tree's URL, the
  base commits, the series' commits as a git bundle, their tree ids); a worker runs in its own
  mirror of the URL, checked against those tree ids. One that cannot fetch fails the task's jobs
  once, with the reason (the task itself succeeds: no redelivery, no retry storm).
- Time limits: each task's hard limit is its jobs' own timeouts plus a margin (plus the fetch's
  timeout for a URL); Celery kills a stuck job's process there, the next job runs, and the job is
  reported as an error saying it timed out.
- A broker restarted without its data (Redis's run id changed) has lost the queued tasks: those
  not collected are sent again. A broker away for longer than `broker_grace` ends the run with one
  line saying how many results did not come; nothing waits forever on a broker.
- Routing: static checks go to the `patchbench.check` queue, builds to `patchbench.build`, boots to
  `patchbench.boot.kvm` or `.tcg` (workers subscribe by what they can do). Affinity: a worker that
  has built a base/config keeps its build directory warm and says so in Redis (a set per build key,
  and a liveness key it refreshes); later builds of that key go to such a live worker's own queue.
  A job left in the queue of a worker that stopped refreshing is sent again to the shared queue.
- A kernel build and the boot of that kernel are one task: the image stays on the worker that built it.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import redis
from celery import Celery
from celery.exceptions import SoftTimeLimitExceeded, TimeLimitExceeded
from kombu.exceptions import OperationalError

from patchbench.dispatch import mirror, wire, workspace
from patchbench.dispatch.build import Context, key_of
from patchbench.dispatch.jobs import (BootJob, CheckJob, Job, JobResult, KernelJob, ObjectsJob, commits_of, in_repo,
                                      repo_of)
from patchbench.dispatch.progress import PlainProgress
from patchbench.dispatch.runner import execute_shown, store_result
from patchbench.dispatch.store import ResultStore
from patchbench.errors import BadInput

CHECK_QUEUE = "patchbench.check"
BUILD_QUEUE = "patchbench.build"
BOOT_QUEUES = {"kvm": "patchbench.boot.kvm", "tcg": "patchbench.boot.tcg"}
ALIVE_SECONDS = 30                 # a worker refreshes its liveness key every third of this
TIME_MARGIN = 120.0                # on top of a task's own job timeouts, before Celery kills it
POLL_SECONDS = 0.2
BROKER_GRACE = 120.0               # how long a run waits for a broker that went away before it gives up


def worker_queue(name: str) -> str:
    return f"patchbench.worker.{name}"


def _alive_key(name: str) -> str:
    return f"patchbench:alive:{name}"


def _warm_key(build_key: str) -> str:
    return f"patchbench:warm:{build_key}"


def _warm_file(cache: Path) -> Path:
    """The submitters' build keys this worker has warm (its own keys differ: it builds in a mirror)."""
    return cache / "farm-warm"


def make_app(broker: str, *, visibility_timeout: float = 4200.0) -> Celery:
    """The Celery application both sides use; `broker` is a redis:// URL (it is the result backend too).

    `visibility_timeout` must exceed the longest task (a full kernel build): a task unacknowledged
    for longer is given to another worker."""
    if not broker.startswith(("redis://", "rediss://", "unix://")):
        raise BadInput(f"--broker {broker!r}: expected a redis:// URL")
    app = Celery("patchbench", broker=broker, backend=broker, set_as_current=False)
    app.conf.update(
        task_serializer="json", result_serializer="json", accept_content=["json"],
        task_acks_late=True, task_reject_on_worker_lost=True, worker_prefetch_multiplier=1,
        task_track_started=True, result_extended=True, result_expires=7 * 24 * 3600,
        broker_connection_retry_on_startup=True, worker_hijack_root_logger=False,
        task_default_queue=BUILD_QUEUE,
        broker_transport_options={"visibility_timeout": visibility_timeout,
                                  # look for abandoned tasks often enough to catch them soon after
                                  "unacked_restore_interval": max(1.0, min(10.0, visibility_timeout / 4)),
                                  "unacked_restore_throttle": 1},
    )
    app.task(name="patchbench.run_jobs", bind=True)(_run_jobs_task)
    return app


def _run_jobs_task(task, jobs: list[dict], source: dict) -> list[dict]:
    """Worker side: get the commits, then run a unit of jobs in order on this machine; results as JSON."""
    cache = workspace.cache_root()
    ctx = Context(cache=cache, logs=cache / "logs" / "farm", progress=PlainProgress())
    name = task.request.hostname
    sent = [wire.job_from_dict(data, cache) for data in jobs]
    start = time.monotonic()
    try:
        repo = mirror.checkout_repo(wire.source_from_dict(source), cache)
    except mirror.FetchFailed as failed:
        return [wire.result_to_dict(JobResult(job.kind, job.patch, job.commit, "error", time.monotonic() - start,
                                              reason=str(failed), worker=name)) for job in sent]
    results = []
    for job in sent:
        start = time.monotonic()
        try:
            result = execute_shown(in_repo(job, repo), ctx)
        except SoftTimeLimitExceeded:
            result = JobResult(job.kind, job.patch, job.commit, "error", time.monotonic() - start,
                               reason="timed out: stopped at the farm's soft time limit")
        result.worker = name
        results.append(wire.result_to_dict(result, with_log=True))
        if isinstance(job, (ObjectsJob, KernelJob)):
            _say_warm(task.app, key_of(job.target), name, cache)
    return results


def _say_warm(app: Celery, build_key: str, name: str, cache: Path) -> None:
    with app.connection_for_write() as conn:
        conn.default_channel.client.sadd(_warm_key(build_key), name)
    known = _warm_file(cache)
    if build_key not in (known.read_text().split() if known.exists() else []):
        with open(known, "a") as out:
            out.write(build_key + "\n")


def known_accel(cache: Path) -> str:
    """"kvm" when this machine's remembered probe boot said KVM works (see qemu.choose_accel), else "tcg"."""
    for probe in cache.glob("kvm-probe-*"):
        if probe.read_text().startswith("kvm\n"):
            return "kvm"
    return "tcg"


def serve(app: Celery, name: str, queues: list[str], celery_args: list[str]) -> None:
    """Run Celery's worker under `name` on `queues`; say in Redis what this machine has warm and can do."""
    from celery import signals

    def start_heartbeat(**_):
        threading.Thread(target=_heartbeat, args=(app.conf.broker_url, name, queues), name="patchbench-heartbeat",
                         daemon=True).start()

    signals.worker_ready.connect(start_heartbeat, weak=False)
    # A job that finishes while the broker restarts keeps trying to store its result (every 10 s at
    # most, for a few minutes) instead of failing with the connection's error.
    app.conf.update(result_backend_always_retry=True, result_backend_max_retries=30)
    app.worker_main(["worker", "--hostname", name, "--queues", ",".join(queues), "--concurrency", "1",
                     "--pool", "prefork", "--without-gossip", "--without-mingle", "--loglevel", "warning",
                     *celery_args])


def _announce(client: redis.Redis, name: str, queues: list[str]) -> None:
    cache = workspace.cache_root()
    builds, known = cache / "builds", _warm_file(cache)
    keys = {p.name for p in builds.iterdir()} if builds.is_dir() else set()
    keys |= set(known.read_text().split()) if known.exists() else set()
    for key in sorted(keys):
        client.sadd(_warm_key(key), name)
    if BOOT_QUEUES["kvm"] in queues:
        client.sadd("patchbench:can:kvm", name)


def _heartbeat(broker: str, name: str, queues: list[str]) -> None:
    """Refresh this worker's liveness key until the process ends. When the key is not there (the
    first beat, or a broker restarted without its data) say again what this worker has warm."""
    client = redis.Redis.from_url(broker, socket_connect_timeout=5, socket_timeout=5)
    while True:
        try:
            if not client.exists(_alive_key(name)):
                _announce(client, name, queues)
            client.set(_alive_key(name), str(time.time()), ex=ALIVE_SECONDS)
        except (redis.RedisError, OSError):
            pass   # the broker is away: Celery reconnects by itself, and this beats again once it is back
        time.sleep(ALIVE_SECONDS / 3)


@dataclass
class _Unit:
    jobs: list[Job]
    queue: str
    worker: str | None = None      # the warm worker whose own queue it was sent to
    task_id: str = ""
    sent: float = 0.0
    limit: float = 0.0             # seconds before Celery kills the task
    results: list[JobResult] | None = None


@dataclass
class FarmRunner:
    """Sends every job to the farm and collects results as they come; the same report as LocalRunner."""
    broker: str
    store: ResultStore | None = None
    timeout: float | None = None   # overall, None: the jobs' own timeouts plus margins
    tree_url: str | None = None    # where workers fetch the base (mirror.tree_url); None: the repository's path
    time_margin: float = TIME_MARGIN
    broker_grace: float = BROKER_GRACE
    app: Celery = field(init=False)

    def __post_init__(self):
        self.app = make_app(self.broker)
        self.source: mirror.Source | None = None   # made by run() from the jobs
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"

    def run(self, jobs: list[Job], ctx: Context) -> list[JobResult]:
        units = self._units(jobs)
        try:
            self._reachable()
            if jobs:
                self.source = self._source(jobs)
            for unit in units:
                self._send(unit)
            self._collect(units, ctx.progress, ctx.logs)
        finally:
            ctx.progress.close()
        results = [r for unit in units for r in unit.results or []]
        if self.store is not None:
            for job, result in zip([j for unit in units for j in unit.jobs], results):
                store_result(self.store, self.run_id, job, result)
        return results

    def _source(self, jobs: list[Job]) -> mirror.Source:
        """What every task of the run carries for its worker to have the jobs' commits."""
        bases, commits = set(), set()
        for job in jobs:
            parents, named = commits_of(job)
            bases |= parents
            commits |= named
        repo = repo_of(jobs[0])
        return mirror.source_for(repo, mirror.tree_url(repo, self.tree_url), bases, commits)

    def _units(self, jobs: list[Job]) -> list[_Unit]:
        units, pending_kernel = [], None
        for job in jobs:
            if isinstance(job, CheckJob):
                units.append(_Unit([job], CHECK_QUEUE))
            elif isinstance(job, KernelJob):
                pending_kernel = _Unit([job], BUILD_QUEUE)
                units.append(pending_kernel)
            elif isinstance(job, BootJob):
                if pending_kernel is not None and pending_kernel.jobs[0].commit == job.commit:
                    pending_kernel.jobs.append(job)
                    pending_kernel.queue = self._boot_queue()
                else:
                    units.append(_Unit([job], self._boot_queue()))
            else:
                units.append(_Unit([job], BUILD_QUEUE))
        return units

    def _client(self):
        return self.app.connection_for_write().default_channel.client

    def _reachable(self) -> None:
        # Asked directly: Celery's own connection retries for seconds before it gives up.
        try:
            redis.Redis.from_url(self.broker, socket_connect_timeout=5, socket_timeout=5).ping()
        except (redis.RedisError, OSError) as exc:
            raise BadInput(f"cannot reach the broker {self.broker}: {exc}") from None

    def _live(self, names) -> list[str]:
        """Those of the worker names (Redis gives bytes) whose liveness key is still there."""
        client = self._client()
        decoded = [name.decode() if isinstance(name, bytes) else name for name in names]
        return sorted(name for name in decoded if client.exists(_alive_key(name)))

    def _boot_queue(self) -> str:
        client = self._client()
        kvm = self._live(client.smembers("patchbench:can:kvm"))
        return BOOT_QUEUES["kvm" if kvm else "tcg"]

    def _send(self, unit: _Unit, shared_only: bool = False) -> None:
        first = unit.jobs[0]
        if not shared_only and isinstance(first, (ObjectsJob, KernelJob)) and unit.queue == BUILD_QUEUE:
            warm = self._live(self._client().smembers(_warm_key(key_of(first.target))))
            if warm:
                # Spread a series over the warm workers, in a fixed order: patch i to warm[i % n].
                unit.worker = warm[(first.patch or 0) % len(warm)]
        queue = worker_queue(unit.worker) if unit.worker and not shared_only else unit.queue
        fetching = 0.0 if self.source.is_path else mirror.FETCH_TIMEOUT   # a cold mirror first fetches the tree
        unit.limit = (sum(getattr(job, "timeout", 600.0) + getattr(job, "build_timeout", 0.0) for job in unit.jobs)
                      + fetching + self.time_margin)
        payload = [wire.job_to_dict(job) for job in unit.jobs]
        task_id = unit.task_id or f"pb-{'-'.join(wire.job_id(job) for job in unit.jobs)[:60]}-{self.run_id}"
        self.app.send_task("patchbench.run_jobs", args=[payload, wire.source_to_dict(self.source)], queue=queue,
                           task_id=task_id, time_limit=unit.limit, soft_time_limit=unit.limit - self.time_margin / 2)
        unit.task_id, unit.sent = task_id, time.monotonic()

    def _collect(self, units: list[_Unit], progress: PlainProgress, logs: Path) -> None:
        waiting = {unit.task_id: unit for unit in units}
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        broker = redis.Redis.from_url(self.broker, socket_connect_timeout=5, socket_timeout=5)
        incarnation, away_since = broker.info("server")["run_id"], None
        while waiting:
            try:
                if broker.info("server")["run_id"] != incarnation:
                    # Restarted without its data: the queued tasks and the results not yet collected are
                    # gone. Send them again; a task still running on a worker stores the same result.
                    incarnation = broker.info("server")["run_id"]
                    for unit in waiting.values():
                        unit.worker = None
                        self._send(unit, shared_only=True)
                self._poll(waiting, progress, logs)
                away_since = None
            except (redis.RedisError, OSError, OperationalError) as exc:
                away_since = away_since or time.monotonic()
                if time.monotonic() - away_since > self.broker_grace:
                    raise BadInput(f"lost the broker {self.broker} for {self.broker_grace:.0f} s: the results of "
                                   f"{len(waiting)} of {len(units)} task(s) did not come ({exc})") from None
            if waiting:
                if deadline is not None and time.monotonic() > deadline:
                    raise BadInput(f"the farm did not finish {len(waiting)} task(s) in {self.timeout:.0f} s")
                time.sleep(POLL_SECONDS)

    def _poll(self, waiting: dict[str, _Unit], progress: PlainProgress, logs: Path) -> None:
        """Take the results that have come for `waiting` (task id -> unit), their logs into `logs`; report them."""
        for task_id, unit in list(waiting.items()):
            async_result = self.app.AsyncResult(task_id)
            state = async_result.state
            if state == "SUCCESS":
                unit.results = [wire.result_from_dict(d, logs) for d in async_result.get()]
            elif state in ("FAILURE", "REVOKED"):
                reason = (f"timed out: killed at the farm's time limit of {unit.limit:.0f} s"
                          if isinstance(async_result.result, TimeLimitExceeded)
                          else f"farm task failed: {async_result.result!r}"[:300])
                # No worker said how long: the time since the task was sent is all there is.
                unit.results = [JobResult(job.kind, job.patch, job.commit, "error", time.monotonic() - unit.sent,
                                          reason=reason) for job in unit.jobs]
            elif state == "PENDING" and unit.worker and not self._live([unit.worker]):
                # Its warm worker stopped: the job sits in that worker's own queue. Send it again.
                unit.worker = None
                self._send(unit, shared_only=True)
                continue
            else:
                continue
            del waiting[task_id]
            for result in unit.results:
                where = f" on {result.worker}" if result.worker else ""
                progress.start(result.scope or result.kind, result.patch, result.commit)
                progress.finish(result.status, (result.reason + where).strip(), result.seconds)
