"""Forked worker processes for the checker: each task's result back in task order.

Written for the failure cases multiprocessing.Pool gets wrong here:
- Signals reach the command only. Workers are forked with SIGINT and SIGTERM blocked and then
  ignore them, so Ctrl-C (sent to the whole process group) or a SIGTERM never runs the command's
  handler inside a worker (the `ForkPoolWorker ... KeyboardInterrupt` tracebacks) nor kills a
  worker halfway through a task (Pool then waits for its result forever).
- Each worker has its own pipe: stopping one (SIGKILL on interrupt) cannot leave a lock shared with
  the others held, which is how Pool.terminate() hangs at 0% CPU.
- On success every worker is told to stop and is joined; only an interrupt or a failure kills them.
  A worker that dies is an error naming its task, never a hang or a missing result.
Workers are replaced after TASKS_PER_WORKER tasks so that tree-sitter's memory goes back to the OS
(rarely: a fresh worker has lost its warm caches, and forking one costs; whole drivers/net + net/
peaks at 160 MB a worker without any replacement). What the command built before forking is
frozen out of the garbage collector, so that no worker's collection touches (and copies) its pages.
"""

from __future__ import annotations

import collections
import gc
import multiprocessing
import signal
import sys
from contextlib import contextmanager
from multiprocessing.connection import Connection, wait
from typing import Callable, Generic, Iterable, Iterator, Sequence, TypeVar

from patchbench.errors import CheckFailed, Failed

Task = TypeVar("Task")
Result = TypeVar("Result")
TASKS_PER_WORKER = 3000
_STOPS = {signal.SIGINT, signal.SIGTERM}
_FORK = multiprocessing.get_context("fork")


def run_all(work: Callable[[Task], Result], tasks: Sequence[Task], jobs: int,
            sizes: Sequence[int] | None = None) -> list[Result]:
    """[work(task) for task in tasks], on up to `jobs` forked processes. With `sizes` (a guess at
    each task's cost: a file's length), the largest are handed out first, so that no worker is
    left with a big one while the others have finished (a series of two large files and a small
    one waits for one large file, not for a large and the small one after it). Without, each
    worker takes the tasks of its own share of the list in order (see _Shares)."""
    gc.freeze()   # what the command built so far is never collected in a worker: its pages stay shared
    try:
        with _Workers(work, min(jobs, len(tasks))) as workers:
            if sizes is not None:
                return workers.map(tasks, _Shares(_largest_first(sizes), 1))
            return workers.map(tasks, _Shares(range(len(tasks)), workers.count))
    finally:
        gc.unfreeze()


class _Shares:
    """Task indexes cut into `parts` contiguous shares, one per worker slot: a slot takes its own
    share from the front, and once that is done, the back of the largest share left. Neighbouring
    tasks (a directory's files, whose callers elsewhere a worker's call index answers keep warm)
    then mostly go to one worker: two workers alternating through the same directories each
    warmed the same answers. One part: every slot takes the next task of the one list."""

    def __init__(self, order: Iterable[int], parts: int):
        order = list(order)
        size = max(1, -(-len(order) // parts))   # rounded up: the last share is the shortest
        self.shares = [collections.deque(order[at:at + size]) for at in range(0, len(order), size)] or [
            collections.deque()]

    def take(self, slot: int) -> int | None:
        """The next task index for the worker in `slot`, None when every share is done."""
        own = self.shares[slot % len(self.shares)]
        if own:
            return own.popleft()
        largest = max(self.shares, key=len)   # the first of the longest: no tie depends on timing
        return largest.pop() if largest else None


def _largest_first(sizes: Sequence[int]) -> list[int]:
    """Task indexes by decreasing size, ties in task order."""
    return sorted(range(len(sizes)), key=lambda index: (-sizes[index], index))


def _serve(work: Callable, connection: Connection, inherited: list[Connection]) -> None:
    """A worker's life: tasks in, ("ok", result) or ("error", exception) out, until None comes."""
    for signum in _STOPS:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)   # blocked since the fork; ignored from now on
    for other in inherited:   # the other workers' pipe ends, copied by the fork
        other.close()
    try:
        while (task := connection.recv()) is not None:
            try:
                reply = ("ok", _collected_after(work, task))
            except Failed as exc:
                reply = ("error", exc)
            except Exception as exc:   # fail closed: a bug outside the rules is an error too
                reply = ("error", CheckFailed(f"checking {_name(task)} failed: {type(exc).__name__}: {exc}"))
            connection.send(reply)
    except (EOFError, OSError):
        pass   # the command has gone: nothing to answer
    connection.close()


def _name(task) -> str:
    """What a task is about, for messages: its first item (a path) when it is a tuple."""
    return str(task[0] if isinstance(task, tuple) and task else task)


class _Workers(Generic[Task, Result]):
    def __init__(self, work: Callable[[Task], Result], count: int):
        self.work = work
        self.count = count
        self.live: dict[Connection, tuple[multiprocessing.process.BaseProcess, list[int]]] = {}

    def start(self) -> Connection:
        ours, theirs = _FORK.Pipe()
        sys.stdout.flush()   # nothing buffered may be written twice, by the worker too
        sys.stderr.flush()
        # Blocked until the worker ignores them; and an interrupt arriving meanwhile is raised only
        # once the worker is in self.live, where __exit__ finds it.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _STOPS)
        try:
            process = _FORK.Process(target=_serve, args=(self.work, theirs, list(self.live)), daemon=False)
            process.start()
            self.live[ours] = (process, [0])
            theirs.close()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return ours

    def map(self, tasks: Sequence[Task], shares: "_Shares") -> list[Result]:
        """Results in task order, the tasks handed out from `shares` (of indexes)."""
        results: list = [None] * len(tasks)
        busy: dict[Connection, tuple[int, int]] = {}   # -> (task index, the worker's slot)

        def give(connection: Connection, slot: int) -> None:
            index = shares.take(slot)
            if index is None:
                self.stop(connection)
                return
            done = self.live[connection][1]
            if done[0] >= TASKS_PER_WORKER:   # recycle: a fresh worker takes the task
                self.stop(connection)
                connection = self.start()
                done = self.live[connection][1]
            done[0] += 1
            busy[connection] = (index, slot)
            connection.send(tasks[index])

        for slot in range(self.count):
            give(self.start(), slot)
        while busy:
            for connection in wait(list(busy)):
                index, slot = busy.pop(connection)
                try:
                    kind, value = connection.recv()
                except (EOFError, OSError):
                    process = self.live[connection][0]
                    process.join(5)
                    raise CheckFailed(f"a checker worker died (exit {process.exitcode}) while checking "
                                      f"{_name(tasks[index])}") from None
                if kind == "error":
                    raise value
                results[index] = value
                give(connection, slot)
        return results

    def stop(self, connection: Connection) -> None:
        """Tell an idle worker to finish, and reap it."""
        process, _ = self.live.pop(connection)
        try:
            connection.send(None)
        except OSError:
            pass
        connection.close()
        process.join(30)
        if process.exitcode is None:
            process.kill()
            process.join()

    def __enter__(self) -> "_Workers":
        return self

    def __exit__(self, *exc) -> None:
        """After success every worker has stopped already; otherwise (an interrupt, an error) the
        remaining ones are killed: they ignore SIGTERM, and their work is not wanted any more."""
        for connection, (process, _) in list(self.live.items()):
            process.kill()
            process.join()
            connection.close()
        self.live.clear()


def parallel(work: Callable[[Task], Result], tasks: Iterable[Task], jobs: int,
             sizes: list[int] | None = None) -> list:
    """work(task) for every task on `jobs` worker processes (results in order; with `sizes`, the
    largest tasks first); in-process for one job or task.

    The checker's workers return findings only, so each holds one file's tree at a time."""
    tasks = list(tasks)
    with _rare_collections():
        if jobs <= 1 or len(tasks) <= 1:
            return [_collected_after(work, task) for task in tasks]
        return run_all(work, tasks, jobs, sizes)


def _collected_after(work: Callable[[Task], Result], task: Task) -> Result:
    """work(task) with the cyclic collector off, and the young generations collected once it ends.
    A task's objects (a file's model, its walks and analyses) form no cycle once the task drops
    them (FileModel.release), so reference counting frees them; collections during the task only
    traversed them while they were alive, again and again (a tenth of lint's CPU). A cycle a task
    leaves behind is still collected, at its end."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return work(task)
    finally:
        if enabled:
            gc.enable()
            gc.collect(1)


@contextmanager
def _rare_collections() -> Iterator[None]:
    """The analyses allocate millions of short-lived frozensets and tuples, few of them in cycles:
    at Python's default threshold (700 allocations) the young generation is collected so often
    that it costs a fifth of lint's CPU. Reference counting still frees them; cycles wait longer.
    Forked workers inherit the setting."""
    before = gc.get_threshold()
    gc.set_threshold(50_000, 50, 100)
    try:
        yield
    finally:
        gc.set_threshold(*before)
