"""The building netdev checks (build-32bit, build-clang, build-tools, ynl) on series of our own writing,
on the newest cached tree (7.2).

Each check fires on the patch that makes its problem and on no other, and stays silent on a clean
patch. The builds are real: dispatch's sandboxed build slots with ccache, in a clone kept at a fixed
place (its configured build directories, keyed by repository, serve later runs; the first run of a
new tree configures and compiles them cold, some minutes per configuration).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from patchbench.cli import main
from patchbench.patchchecks import select
from patchbench.patchchecks.checks import build_clang, ynl
from patchbench.patchchecks.context import Skip
from tests.conftest import missing, require_tool
from tests.support.git_series import commit_files, format_patch, git
from tests.support.kernel import CACHE, KERNELS, NEWEST
from tests.support.netdev_series import ADA, TUN, Change, mail_series

pytestmark = [pytest.mark.kernel, pytest.mark.slow]
BUILD_TOOLS = ("make", "gcc", "ccache", "bwrap", "flex", "bison", "bc")

HEADROOM_ELSE = "\telse\n\t\tmax_headroom -= 1;\n"
HEADROOM_CLAMP = "\ttun->align = clamp_t(int, new_hr"
XSK_FEATURES = "        name: xsk-features\n        doc: Bitmask of enabled AF_XDP features.\n"
SPEC = "Documentation/netlink/specs/netdev.yaml"
AF_UNIX = "tools/testing/selftests/net/af_unix/unix_connect.c"


def check(series: Path, repo: Path, checks: str) -> tuple[int, dict]:
    out = io.StringIO()
    with redirect_stdout(out):
        code = main(["check", str(series), "--tree", str(repo), "--format", "json", "--checks", checks])
    return code, json.loads(out.getvalue())


def found(report: dict, rule: str) -> list[tuple[int, str, str, str]]:
    """(patch, file, function, message) of each finding of `rule`."""
    return [(f["patch"], f["file"], f["function"], f["message"]) for f in report["findings"] if f["rule"] == rule]


@pytest.fixture(scope="module")
def newest(kernel_tree_new) -> tuple[Path, str]:
    """A clone of the newest tree at a fixed place per tree (its build slots stay warm between runs)."""
    repo = CACHE / f"nipa-builds-clone-{kernel_tree_new.name}"
    if not (repo / ".git" / "patchbench-ready").exists():
        shutil.rmtree(repo, ignore_errors=True)
        git(CACHE, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree_new), str(repo))
        (repo / ".git" / "patchbench-ready").touch()
    return repo, git(repo, "rev-parse", KERNELS[NEWEST].tag)


@pytest.fixture(scope="module")
def compiler_series(newest, tmp_path_factory) -> Path:
    """Patch 1 prints a size_t with %lu (wrong only where size_t is unsigned int: 32-bit); patch 2
    assigns a variable to itself (only clang says so); patch 3 is clean (%zu, a comment)."""
    repo, base = newest
    changes = [
        Change(TUN, "tun: say the headroom limit", f"Debugging aid.\n\nSigned-off-by: {ADA}",
               [(HEADROOM_ELSE, HEADROOM_ELSE + '\tnetdev_dbg(dev, "headroom limit %lu\\n", max_headroom);\n')]),
        Change(TUN, "tun: keep the requested headroom", f"Spelled out.\n\nSigned-off-by: {ADA}",
               [(HEADROOM_CLAMP, "\tnew_hr = new_hr;\n" + HEADROOM_CLAMP)]),
        Change(TUN, "tun: say the requested headroom", f"Debugging aid.\n\nSigned-off-by: {ADA}",
               [(HEADROOM_CLAMP, '\t/* the limit, whatever was asked */\n'
                                 '\tnetdev_dbg(dev, "headroom asked %d of %zu\\n", new_hr, max_headroom);\n'
                 + HEADROOM_CLAMP)]),
    ]
    return mail_series(repo, base, changes, tmp_path_factory.mktemp("compiler") / "series", prefix="PATCH net-next")


def test_build_32bit_fires_on_the_size_t_printed_with_lu(newest, compiler_series):
    for tool in BUILD_TOOLS:
        require_tool(tool)
    code, report = check(compiler_series, newest[0], "build-32bit")
    assert {c["id"]: c["status"] for c in report["checks"]} == {"rules": "skipped", "build-32bit": "ran"}
    ((patch, path, function, message),) = found(report, "build-32bit")
    assert (patch, path, function) == (1, TUN, "tun_set_headroom") and code == 1
    assert "'%lu' expects argument of type 'long unsigned int'" in message and "[-Wformat=]" in message


def test_build_clang_fires_on_the_self_assignment_only(newest, compiler_series):
    for tool in BUILD_TOOLS:
        require_tool(tool)
    code, report = check(compiler_series, newest[0], "build-clang")
    status = {c["id"]: (c["status"], c["reason"]) for c in report["checks"]}["build-clang"]
    if status[0] == "skipped":
        missing(status[1])      # no clang new enough for the tree (Debian 12: clang-19 lld-19 llvm-19)
    ((patch, path, _, message),) = found(report, "build-clang")   # clang prints no "In function" line
    assert (patch, path) == (2, TUN) and code == 1
    assert "assigning value of variable of type 'int' to itself" in message and "[-Wself-assign]" in message


def test_build_clang_is_skipped_with_its_reason_without_a_new_enough_clang(newest, compiler_series, tmp_path,
                                                                         monkeypatch):
    """Only an old `clang` (a stand-in saying 14.0.6, Debian 12's) on PATH: the 7.2 tree wants 17.0.1."""
    fake = tmp_path / "bin" / "clang"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'Debian clang version 14.0.6'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{_no_clang(tmp_path)}")
    assert build_clang.installed_clangs() == {"": (14, 0, 6)}
    code, report = check(compiler_series, newest[0], "build-clang")
    status = {c["id"]: (c["status"], c["reason"]) for c in report["checks"]}["build-clang"]
    assert status == ("skipped", "no clang with its LLVM tools at least 17.0.1 (the tree's minimum) is installed: "
                                 "clang 14.0.6 (Debian: clang-19 lld-19 llvm-19)")
    assert code == 0 and report["findings"] == []


def _no_clang(tmp_path: Path) -> str:
    """A directory of links to the tools the check runs besides clang (git, sh, perl)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("git", "sh", "perl", "bash"):
        if host := shutil.which(name):
            (tools / name).symlink_to(host)
    return str(tools)


def test_build_tools_fires_on_the_selftest_that_no_longer_compiles(newest, tmp_path):
    for tool in BUILD_TOOLS:
        require_tool(tool)
    repo, base = newest
    main_line = "TEST_F(unix_connect, test)"
    changes = [
        Change(AF_UNIX, "selftests: af_unix: say what unix_connect covers", f"Readers ask.\n\nSigned-off-by: {ADA}",
               [(main_line + "\n", "/* connect() on every kind of address */\n" + main_line + "\n")]),
        Change(AF_UNIX, "selftests: af_unix: count the connections", f"Counted.\n\nSigned-off-by: {ADA}",
               [("/* connect() on every kind of address */\n",
                 "/* connect() on every kind of address */\nstatic int pb_connections = pb_no_such_count;\n")]),
    ]
    series = mail_series(repo, base, changes, tmp_path / "series", prefix="PATCH net-next")
    code, report = check(series, repo, "build-tools")
    got = found(report, "build-tools")
    # the broken line also leaves its variable unused: both are new, both on patch 2; patch 1 is clean
    assert {(p, path) for p, path, _, _ in got} == {(2, AF_UNIX)}, got
    severities = {f["message"]: f["severity"] for f in report["findings"]}
    assert severities == {"'pb_no_such_count' undeclared here (not in a function)": "error",
                          "'pb_connections' defined but not used [-Wunused-variable]": "warning"} and code == 1


def test_build_tools_builds_a_tools_directory_outside_the_selftests(newest, tmp_path):
    """tools/testing/vsock is built by `make -C` in its own directory (its Makefile has -Werror):
    a variable left unused by patch 2 breaks it there; patch 1's comment does not."""
    for tool in BUILD_TOOLS:
        require_tool(tool)
    repo, base = newest
    perf, usage = "tools/testing/vsock/vsock_perf.c", "static void usage(void)\n"
    changes = [
        Change(perf, "vsock/test: say what usage() prints", f"Readers ask.\n\nSigned-off-by: {ADA}",
               [(usage, "/* the options, one a line */\n" + usage)]),
        Change(perf, "vsock/test: count the runs", f"Counted.\n\nSigned-off-by: {ADA}",
               [("/* the options, one a line */\n", "/* the options, one a line */\nstatic int pb_runs;\n")]),
    ]
    series = mail_series(repo, base, changes, tmp_path / "series", prefix="PATCH net-next")
    code, report = check(series, repo, "build-tools")
    got = found(report, "build-tools")
    assert [(p, path, message) for p, path, _, message in got] == [
        (2, perf, "'pb_runs' defined but not used [-Werror=unused-variable]")], got
    assert report["findings"][0]["severity"] == "error" and code == 1


@pytest.fixture(scope="module")
def spec_series(newest, tmp_path_factory) -> tuple[Path, set[str]]:
    """Patch 1 adds an attribute to netdev.yaml and commits no generated code; patch 2 is what the tree's
    ynl-regen.sh, run by hand in a checkout of patch 1, rewrites. Returns the series and those files."""
    try:
        python = ynl.python()
    except Skip as skip:
        missing(str(skip))      # .ci/run installs python3-yaml and python3-jsonschema
    repo, base = newest
    spec = git(repo, "show", f"{base}:{SPEC}") + "\n"
    assert spec.count(XSK_FEATURES) == 1
    added = spec.replace(XSK_FEATURES, "        name: pb-queue-count\n        doc: Queues counted by patchbench.\n"
                                       "        type: u32\n      -\n" + XSK_FEATURES)
    first = commit_files(repo, base, {SPEC: added.encode()},
                         f"netdev: add pb-queue-count to the spec\n\nTo be filled in.\n\nSigned-off-by: {ADA}")
    work = tmp_path_factory.mktemp("regen") / "linux"
    git(repo, "worktree", "add", "-q", "--detach", str(work), first)
    try:
        (work / SPEC).touch()     # ynl-regen.sh skips the files newer than their spec
        env = {**os.environ, "PATH": f"{Path(python).parent}{os.pathsep}{os.environ['PATH']}"}
        subprocess.run(["bash", "tools/net/ynl/ynl-regen.sh"], cwd=work, env=env, check=True, capture_output=True,
                       timeout=600)
        changed = set(git(work, "diff", "--name-only").splitlines())
        second = commit_files(repo, first, {path: (work / path).read_bytes() for path in changed},
                              f"netdev: regenerate from the spec\n\nynl-regen.sh.\n\nSigned-off-by: {ADA}")
    finally:
        git(repo, "worktree", "remove", "--force", str(work))
    out = tmp_path_factory.mktemp("spec") / "series"
    format_patch(repo, base, second, out, "--subject-prefix=PATCH net-next")
    return out, changed


def test_ynl_names_the_stale_files_ynl_regen_rewrites(newest, spec_series):
    series, regenerated = spec_series
    code, report = check(series, newest[0], "ynl")
    got = found(report, "ynl")
    assert "include/uapi/linux/netdev.h" in regenerated
    assert {(p, path) for p, path, _, _ in got} == {(1, path) for path in regenerated}
    assert all(m == f"stale: generated from {SPEC}, but not what tools/net/ynl/ynl-regen.sh writes from it now"
               for _, _, _, m in got) and code == 1


def test_the_building_checks_run_only_when_asked():
    netdev = select("netdev", [])[1]
    builds = select("builds", [])[1]
    assert builds == ["build-32bit", "build-clang", "build-tools", "ynl"]
    assert not set(builds) & set(netdev) and select("all", [])[1] == netdev
    assert select("ynl,signoff", [])[1] == ["signoff", "ynl"]


def test_ynl_reports_a_spec_the_generator_refuses(newest, tmp_path):
    try:
        ynl.python()
    except Skip as skip:
        missing(str(skip))
    repo, base = newest
    spec = git(repo, "show", f"{base}:{SPEC}") + "\n"
    broken = spec.replace(XSK_FEATURES, XSK_FEATURES.replace("xsk-features", "xsk features!"))
    tip = commit_files(repo, base, {SPEC: broken.encode()},
                       f"netdev: rename an attribute\n\nSpelled out.\n\nSigned-off-by: {ADA}")
    format_patch(repo, base, tip, tmp_path / "series", "--subject-prefix=PATCH net-next")
    code, report = check(tmp_path / "series", repo, "ynl")
    ((patch, path, _, message),) = found(report, "ynl")
    assert (patch, path) == (1, SPEC) and message.startswith("the tree's generator fails on it (exit 1): ")
    assert code == 1
