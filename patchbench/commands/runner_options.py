"""--runner and --broker, for the commands that can hand their jobs to a farm (build, boot, run,
check, bot). Apart from the dispatch stage, so that `check`, which runs locally unless told
otherwise, does not import it (a fifth of its start-up)."""

from __future__ import annotations

import argparse
import os


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runner", choices=("local", "celery"), default=os.environ.get("PATCHBENCH_RUNNER", "local"),
                        help="where jobs run: this machine, or a Celery farm (default: $PATCHBENCH_RUNNER or local)")
    parser.add_argument("--broker", default=os.environ.get("PATCHBENCH_BROKER"), metavar="URL",
                        help="the farm's Redis for --runner celery (default: $PATCHBENCH_BROKER)")
    parser.add_argument("--tree-url", default=None, metavar="URL",
                        help="where farm workers fetch the base commits (the series' own go with each job); "
                             "default: git config patchbench.tree-url of the tree, else its path (workers then "
                             "need the same file system)")
