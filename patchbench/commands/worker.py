"""`patchbench worker --broker redis://…`: run patchbench jobs from a Celery farm on this machine.

Celery's own worker runs underneath, one job at a time (builds use every core with make -j);
options after `--` go to it unchanged (e.g. `-- --loglevel info`). The worker keeps its own warm
build directories, ccache and mirrors of the trees under its cache (`PATCHBENCH_CACHE`, default
~/.cache/patchbench). `--check` says whether this machine is ready and exits (0 ready, 1 not).
"""

from __future__ import annotations

import os
import shutil
import socket

from patchbench.dispatch import farm, readiness, workspace


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser("worker", help="run build, boot and check jobs from a Celery farm")
    parser.add_argument("--broker", default=os.environ.get("PATCHBENCH_BROKER"), metavar="URL",
                        required="PATCHBENCH_BROKER" not in os.environ,
                        help="the farm's Redis, redis://host:port/db (default: $PATCHBENCH_BROKER)")
    parser.add_argument("--name", default=f"patchbench@{socket.gethostname()}",
                        help="this worker's name, unique in the farm (default: patchbench@HOST)")
    parser.add_argument("--queues", metavar="Q,Q", default=None,
                        help="queues to take jobs from (default: check, build, its own, and boot "
                             "when QEMU is installed: boot.kvm after a KVM probe succeeded, else boot.tcg)")
    parser.add_argument("--visibility-timeout", type=float, default=4200.0, metavar="S",
                        help="seconds before an unacknowledged job of a dead worker runs elsewhere "
                             "(must exceed the longest job; default: 4200)")
    parser.add_argument("--check", action="store_true",
                        help="say whether this machine is ready (tools, KVM or TCG, disk, broker, --tree-url) and exit")
    parser.add_argument("--tree-url", action="append", default=[], metavar="URL",
                        help="with --check: a tree this worker must be able to fetch (repeatable)")
    parser.add_argument("celery_args", nargs="*", metavar="-- CELERY-OPTION",
                        help="passed to Celery's worker")
    parser.set_defaults(func=run)


def default_queues(name: str) -> list[str]:
    queues = [farm.CHECK_QUEUE, farm.BUILD_QUEUE, farm.worker_queue(name)]
    if shutil.which("qemu-system-x86_64"):
        queues.append(farm.BOOT_QUEUES[farm.known_accel(workspace.cache_root())])
    return queues


def run(args) -> int:
    if args.check:
        probes = readiness.probe_all(args.broker, args.tree_url, workspace.cache_root())
        for probe in probes:
            print(probe.line())
        ready = all(probe.ok for probe in probes if probe.required)
        print("ready" if ready else "not ready")
        return 0 if ready else 1
    app = farm.make_app(args.broker, visibility_timeout=args.visibility_timeout)
    queues = args.queues.split(",") if args.queues else default_queues(args.name)
    farm.serve(app, args.name, queues, list(args.celery_args))
    return 0
