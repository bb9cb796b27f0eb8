"""The farm across machines: two workers that share nothing with the submitter but the broker.

A real redis-server on loopback; each `patchbench worker` runs under bubblewrap with a home and
cache of its own, the host's /tmp (the submitter's repository) and ~/.cache (this machine's kernel
trees, call index and build directories) hidden. The kernel tree reaches the workers only as the
file URL of a bare copy (kept in the tests' cache: it takes minutes to pack); the series' own commits
only through the tasks. Four series on 6.1 (clean, a locking bug, one whose second patch does not
apply, one that adds a compiler warning) are checked locally and on the farm, one worker killed in
the middle of a job: the reports must be the local ones.

Each worker's call index (of whole trees, by blob id, minutes to build from nothing) is seeded with
hard links to this machine's, as a farm would ship it; its facts cache, mirror and builds start empty.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from patchbench.dispatch.farm import make_app
from tests.conftest import require_tool
from tests.support import kernel
from tests.support.farm import Workers, kept_served_copy, redis_server, seed_index, started_on
from tests.support.git_series import git
from tests.support.ring_series import TUN_HELPER_UNLOCKED_PATH, commit_series, make_series, tun_patch
from tests.test_bot import setup  # noqa: F401  (the bot's queue of series on 6.1, a module fixture)

pytestmark = pytest.mark.kernel
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def served(kernel_tree) -> Path:
    return kept_served_copy(kernel_tree)


def _comment(repo: Path, base: str, path: str) -> tuple:
    whole = git(repo, "show", f"{base}:{path}") + "\n"
    return path, f"{path.split('/')[-1]}: comment", [(whole, whole + "/* remote farm test */\n")]


VETH_UNUSED = ("drivers/net/veth.c", "veth: count the peers", [
    ("static int veth_get_iflink(const struct net_device *dev)\n{\n",
     "static int veth_get_iflink(const struct net_device *dev)\n{\n\tint peers;\n")])


@pytest.fixture(scope="module")
def four_series(kernel_clone, tmp_path_factory) -> dict[str, Path]:
    repo, base = kernel_clone
    out = tmp_path_factory.mktemp("four-series")
    virtio = "drivers/net/virtio_net.c"
    elsewhere = commit_series(repo, base, [_comment(repo, base, virtio)])   # a change the tree does not have
    on_top = git(repo, "show", f"{elsewhere}:{virtio}") + "\n"
    return {
        "clean": make_series(repo, base, [_comment(repo, base, "drivers/net/macvlan.c"),
                                          _comment(repo, base, "drivers/net/tap.c")], out / "clean"),
        "locking": make_series(repo, base, [tun_patch(TUN_HELPER_UNLOCKED_PATH),
                                            _comment(repo, base, "drivers/net/veth.c")], out / "locking"),
        "no-apply": make_series(repo, elsewhere, [_comment(repo, elsewhere, "drivers/net/macvlan.c"),
                                                  (virtio, "virtio_net: more", [(on_top, on_top + "/* more */\n")])],
                                out / "no-apply"),
        "warning": make_series(repo, base, [VETH_UNUSED], out / "warning"),
    }


def _check(series: Path, repo: Path, base: str, env: dict, *extra: str) -> tuple[int, dict, str]:
    proc = subprocess.run([sys.executable, "-m", "patchbench", "check", str(series), "--tree", str(repo),
                           "--base", base, "--format", "json", *extra], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
    report = json.loads(proc.stdout) if proc.stdout else {}
    for run in report.get("checks", []):   # each check's time differs run to run
        run.pop("seconds")
    return proc.returncode, report, proc.stderr


def test_workers_that_see_only_the_broker_and_the_tree_url_give_the_local_reports(
        kernel_clone, served, four_series, tmp_path):
    for tool in ("redis-server", "bwrap"):
        require_tool(tool)
    repo, base = kernel_clone
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PATCHBENCH_CACHE": str(tmp_path / "submitter")}
    local = {name: _check(series, repo, base, env) for name, series in four_series.items()}
    rule_findings = {name: [(f["rule"], f["patch"]) for f in report["findings"]
                            if f["rule"] in report["checked"]["rules"]] for name, (_, report, _) in local.items()}
    assert rule_findings == {"clean": [], "locking": [("ptr-ring-consume-unlocked", 1)], "no-apply": [],
                             "warning": []}
    assert (len(local["no-apply"][1]["patches"]), local["no-apply"][1]["failed"]["index"]) == (1, 2)

    with redis_server(tmp_path) as broker:
        workers = Workers(broker, tmp_path)
        try:
            for name in ("w1@remote", "w2@remote"):
                seed_index(workers.home(name))
                workers.start(name, alone=(served,))
            farm_env = {**env, "PATCHBENCH_RUNNER": "celery", "PATCHBENCH_BROKER": broker}
            url = served.as_uri()
            git(repo, "config", "patchbench.tree-url", url)   # as a submitter sets it once
            farm = {}
            for name, series in four_series.items():
                if name != "locking":
                    farm[name] = _check(series, repo, base, farm_env)
                    continue
                # Both workers take a job of this series; kill w1 in the middle of its own: it runs again on w2.
                proc = subprocess.Popen([sys.executable, "-m", "patchbench", "check", str(series), "--tree",
                                         str(repo), "--base", base, "--format", "json", "--tree-url", url],
                                        cwd=ROOT, env=farm_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
                victim = started_on(broker, "w1@remote", proc)
                workers.kill("w1@remote")
                out, err = proc.communicate(timeout=600)
                report = json.loads(out)
                for run in report["checks"]:
                    run.pop("seconds")
                farm[name] = (proc.returncode, report, err)
                assert [r["worker"] for r in make_app(broker).AsyncResult(victim).get(timeout=10)] == ["w2@remote"]
                workers.start("w1@remote", alone=(served,))   # back, with its mirror and caches
            for name in four_series:
                assert farm[name][:2] == local[name][:2], (name, farm[name][2])
            for name in ("w1@remote", "w2@remote"):   # each fetched the tree into a mirror of its own
                assert list((workers.home(name) / ".cache" / "patchbench" / "mirrors").glob("*.git"))

            # Without the tree's URL the workers are given the submitter's path, which they cannot see:
            # one clear line, exit 2, no pass.
            git(repo, "config", "--unset", "patchbench.tree-url")
            code, report, err = _check(four_series["clean"], repo, base, farm_env)
            assert code == 2 and report == {} and err.count("patchbench: error:") == 1, err
            assert err.splitlines()[-1].startswith("patchbench: error: patch 1 was not checked on w")
            assert "is not a git repository on this worker" in err and "--tree-url" in err
        finally:
            workers.stop()
            subprocess.run(["git", "-C", str(repo), "config", "--unset-all", "patchbench.tree-url"], timeout=30)


def test_the_bot_on_remote_workers_posts_the_local_checks(setup, patchwork_spec, served, tmp_path):
    """The bot's queue (tests/test_bot.py) through two workers that see only the broker and the
    tree's URL (`--tree-url`): the checks posted are those the bot posts running alone."""
    from tests.support.patchwork_server import PatchworkServer
    from tests.test_bot import expected_checks, load, posted, run_bot

    for tool in ("redis-server", "bwrap"):
        require_tool(tool)
    with redis_server(tmp_path) as broker, PatchworkServer() as pw:
        workers = Workers(broker, tmp_path)
        try:
            for name in ("w1@bot", "w2@bot"):
                seed_index(workers.home(name))
                workers.start(name, alone=(served,))
            series = load(pw, setup["queue"])
            done = run_bot(pw, setup, tmp_path, "--wait-incomplete", "0", "--runner", "celery", "--broker", broker,
                           "--tree-url", served.as_uri())
            assert done.returncode == 0, done.stderr
            checks = posted(pw)
            assert len(checks) == len(set(checks))
            assert set(checks) == expected_checks(series, setup, incomplete_reported=True)
            assert "on w1@bot" in done.stderr or "on w2@bot" in done.stderr
            assert pw.violations == []
        finally:
            workers.stop()


@pytest.mark.slow
def test_a_remote_worker_killed_mid_build_loses_nothing(kernel_tree, served, tmp_path):
    """The planted warning-series' touched-object builds on two cold remote workers; w1 is killed
    while it configures or compiles, and its job runs again on w2 (after the visibility timeout)."""
    from tests.support.planted import plant

    for tool in ("redis-server", "bwrap", "make", "gcc", "ccache", "flex", "bison", "bc"):
        require_tool(tool)
    base = kernel.base_commit(kernel_tree)
    head, _ = plant(kernel_tree, "warning-series", base)

    def build(*extra: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "patchbench", "build", f"{base}..{head}", "--tree",
                                 str(kernel_tree), "--format", "json", "--results", str(tmp_path / "r.sqlite"),
                                 *extra], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def same(report: str) -> list[dict]:
        return [{k: v for k, v in job.items() if k not in ("seconds", "log", "worker")}
                for job in json.loads(report)["jobs"]]
    local_out, local_err = build().communicate(timeout=3600)
    with redis_server(tmp_path) as broker:
        workers = Workers(broker, tmp_path, visibility_timeout=240)   # longer than a cold build here
        try:
            for name in ("w1@remote", "w2@remote"):
                workers.start(name, alone=(served,))
            proc = build("--runner", "celery", "--broker", broker, "--tree-url", served.as_uri())
            victim = started_on(broker, "w1@remote", proc)
            time.sleep(15)
            workers.kill("w1@remote")
            farm_out, farm_err = proc.communicate(timeout=3600)
            assert proc.returncode == 1, farm_err   # the planted warnings, as locally
            assert same(farm_out) == same(local_out), farm_err
            assert [r["worker"] for r in make_app(broker).AsyncResult(victim).get(timeout=10)] == ["w2@remote"]
        finally:
            workers.stop()
