"""NIPA's static per-patch checks (check-selftest, shellcheck, ruff, pylint, yamllint, signed) on series of
our own writing: on a small kernel-shaped tree the test makes, each fires on its planted problem on
the right patch, each runs alone with --checks, and what a patch only moves is not reported.
"""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from patchbench.cli import main
from patchbench.patchchecks.context import Skip
from patchbench.patchchecks.linters import find_program
from tests.conftest import missing, require_tool
from tests.support.git_series import commit_files, git
from tests.support.kernel import KERNELS, NEWEST
from tests.test_patchchecks import NETDEV, by_hand_maintainers

SOB = "Signed-off-by: Ada Series <ada@example.org>"
NET = "tools/testing/selftests/net"
MAKEFILE = """# SPDX-License-Identifier: GPL-2.0
TEST_PROGS := \\
	alpha.sh \\
	gamma.sh \\
	kappa.sh \\
# end of TEST_PROGS

TEST_GEN_FILES := \\
	beta_prog \\
	zeta_prog \\
# end of TEST_GEN_FILES

include ../../lib.mk
"""
GITIGNORE = "# SPDX-License-Identifier: GPL-2.0-only\nbeta_prog\nzeta_prog\n"
CONFIG = "CONFIG_BRIDGE=y\nCONFIG_DUMMY=m\nCONFIG_VETH=y\n"
# an existing script with shellcheck reports of its own (SC2164 warning, SC2086 info)
ALPHA = '#!/bin/bash\n# SPDX-License-Identifier: GPL-2.0\n\ndir=$(mktemp -d)\ncd "$dir"\necho $1\n'
CLEAN_SH = '#!/bin/bash\n# SPDX-License-Identifier: GPL-2.0\n\necho "{name}: ok"\n'
TOOL = "tools/net/ynl/pb_tool.py"
TOOL_PY = "# SPDX-License-Identifier: GPL-2.0\nimport os\n\n\ndef main():\n    return 0\n"   # F401 already
SPEC = "Documentation/netlink/specs/pbdemo.yaml"
SPEC_YAML = "---\nname: pbdemo\ndoc: A family for the tests.\noperations:\n  list:\n    - name: get\n"
PROGRAM_C = "// SPDX-License-Identifier: GPL-2.0\nint main(void)\n{\n\treturn 0;\n}\n"
LINTERS = ["check-selftest", "pylint", "ruff", "shellcheck", "yamllint"]


def make_tree(repo: Path) -> str:
    git(repo.parent, "init", "-q", "-b", "net-next", str(repo))
    base = commit_files(repo, None, {
        "MAINTAINERS": b"", f"{NET}/Makefile": MAKEFILE.encode(), f"{NET}/.gitignore": GITIGNORE.encode(),
        f"{NET}/config": CONFIG.encode(), f"{NET}/alpha.sh": ("100755", ALPHA.encode()),
        f"{NET}/gamma.sh": ("100755", CLEAN_SH.format(name="gamma").encode()),
        f"{NET}/kappa.sh": ("100755", CLEAN_SH.format(name="kappa").encode()),
        TOOL: TOOL_PY.encode(), SPEC: SPEC_YAML.encode()}, f"pbtree: a kernel-shaped tree\n\n{SOB}")
    git(repo, "update-ref", "refs/heads/net-next", base)
    return base


def mail_commits(repo: Path, base: str, commits: list[tuple[str, dict]], out: Path,
                 prefix: str = "PATCH net-next", trailers: str = "", cc: list[str] = ()) -> Path:
    """Each (subject, {path: content}) becomes a commit on the last; all mailed with a cover letter."""
    tip = base
    for subject, files in commits:
        tip = commit_files(repo, tip, files, f"{subject}\n\nWhy it is done, in a sentence.\n\n{trailers}{SOB}")
    git(repo, "format-patch", "-q", "--thread", "--cover-letter", f"--base={base}", "-o", str(out),
        f"--subject-prefix={prefix}", *(f"--cc={address}" for address in cc), f"{base}..{tip}")
    return out


def run_check(capsys, series: Path, repo: Path, checks: str) -> tuple[int, dict]:
    code = main(["check", str(series), "--tree", str(repo), "--format", "json", "--checks", checks])
    return code, json.loads(capsys.readouterr().out)


def found(report: dict) -> list[tuple[int, str, str, str]]:
    return sorted((f["patch"], f["rule"], f["file"], f["message"]) for f in report["findings"])


@pytest.fixture(scope="module")
def tools():
    for name in ("shellcheck", "yamllint"):
        require_tool(name)
    for name in ("ruff", "pylint"):
        try:
            find_program(name)
        except Skip:
            missing(f"{name} is not installed (pip install -e '.[test]')")


@pytest.fixture(scope="module")
def planted(tmp_path_factory, tools):
    """Six patches, each with one kind of problem or none, on the small tree."""
    root = tmp_path_factory.mktemp("nipa")
    repo = root / "linux"
    base = make_tree(repo)
    makefile_delta = MAKEFILE.replace("\tgamma.sh \\\n", "\tdelta.sh \\\n\tgamma.sh \\\n")
    commits = [
        # 1: a new test, listed in order: nothing to say
        ("selftests: net: add delta.sh", {f"{NET}/delta.sh": ("100755", CLEAN_SH.format(name="delta").encode()),
                                          f"{NET}/Makefile": makefile_delta.encode()}),
        # 2: a new program in neither the Makefile nor .gitignore
        ("selftests: net: add omega_prog", {f"{NET}/omega_prog.c": PROGRAM_C.encode()}),
        # 3: a new test listed out of order; an option set twice in config
        ("selftests: net: add epsilon.sh", {
            f"{NET}/epsilon.sh": ("100755", CLEAN_SH.format(name="epsilon").encode()),
            f"{NET}/Makefile": makefile_delta.replace("\tkappa.sh \\\n", "\tkappa.sh \\\n\tepsilon.sh \\\n").encode(),
            f"{NET}/config": CONFIG.replace("CONFIG_DUMMY=m\n", "CONFIG_DUMMY=m\nCONFIG_DUMMY=y\n").encode()}),
        # 4: alpha.sh's lines moved (its reports are not new) and one more unquoted argument (new)
        ("selftests: net: alpha: say the argument first", {f"{NET}/alpha.sh": (
            "100755", ALPHA.replace('dir=$(mktemp -d)\ncd "$dir"\necho $1\n',
                                    'echo $1\necho $2\ndir=$(mktemp -d)\ncd "$dir"\n').encode())}),
        # 5: an unused import added next to the one already there
        ("tools: ynl: pb_tool: import sys", {TOOL: TOOL_PY.replace("import os\n", "import os\nimport sys\n").encode()}),
        # 6: a key given twice in a netlink spec
        ("netlink: specs: pbdemo: repeat the doc", {SPEC: (SPEC_YAML + "doc: Again.\n").encode()}),
    ]
    return repo, mail_commits(repo, base, commits, root / "series")


EXPECTED = [
    (2, "check-selftest", f"{NET}/omega_prog.c", f"new selftest omega_prog is not in {NET}/.gitignore"),
    (2, "check-selftest", f"{NET}/omega_prog.c", f"new selftest omega_prog is not in {NET}/Makefile"),
    (3, "check-selftest", f"{NET}/Makefile",
     f"TEST_PROGS in {NET}/Makefile is kept sorted: 'epsilon.sh' should come before 'kappa.sh'"),
    (3, "check-selftest", f"{NET}/config", f"CONFIG_DUMMY is set 2 times in {NET}/config"),
    (4, "shellcheck", f"{NET}/alpha.sh", "SC2086: Double quote to prevent globbing and word splitting."),
    (5, "pylint", TOOL, "W0611: Unused import sys"),
    (5, "ruff", TOOL, "F401: `sys` imported but unused"),
    (6, "yamllint", SPEC, 'key-duplicates: duplication of key "doc" in mapping'),
]


def test_each_static_check_fires_on_its_patch_and_only_there(planted, capsys):
    repo, series = planted
    code, report = run_check(capsys, series, repo, ",".join(LINTERS))
    assert {c["id"]: c["status"] for c in report["checks"]} == {**{c: "ran" for c in LINTERS}, "rules": "skipped"}
    assert found(report) == EXPECTED and code == 1


@pytest.mark.parametrize("check", LINTERS)
def test_each_static_check_runs_alone(planted, capsys, check):
    repo, series = planted
    code, report = run_check(capsys, series, repo, check)
    assert [c["id"] for c in report["checks"] if c["status"] == "ran"] == [check]
    assert found(report) == [f for f in EXPECTED if f[1] == check] and code == 1


def test_the_reports_keep_their_lines(planted, capsys):
    """New by identity, but reported where the patch put it: the new SC2086 is on line 5 of alpha.sh."""
    repo, series = planted
    _, report = run_check(capsys, series, repo, "shellcheck,yamllint")
    assert sorted((f["rule"], f["line"], f["severity"]) for f in report["findings"]) == [
        ("shellcheck", 5, "note"), ("yamllint", 7, "error")]


def test_a_linter_the_machine_lacks_is_skipped_with_its_name(planted, capsys, tmp_path, monkeypatch):
    """PATH with git and perl only: shellcheck is skipped, saying so; the other checks still run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("git", "perl"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    repo, series = planted
    code, report = run_check(capsys, series, repo, "shellcheck,check-selftest")
    status = {c["id"]: (c["status"], c["reason"]) for c in report["checks"]}
    assert status["shellcheck"] == ("skipped", "shellcheck is not installed")
    assert status["check-selftest"] == ("ran", "") and code == 1


# --- on the newest kernel ---------------------------------------------------------------------

def test_a_new_selftest_on_the_newest_tree_clean_with_every_check_or_not_in_the_makefile(kernel_tree_new, tmp_path,
                                                                                         capsys, tools):
    """A net fix adding a selftest to 7.2's own tools/testing/selftests/net: listed in its sorted
    TEST_PROGS and mailed to whom get_maintainer.pl names, every netdev check is silent; the same
    test left out of the Makefile is reported on its patch."""
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree_new), str(repo))
    base = git(repo, "rev-parse", KERNELS[NEWEST].tag)
    makefile = git(repo, "show", f"{base}:{NET}/Makefile") + "\n"
    if "\tbig_tcp.sh \\\n\tbind_bhash.sh \\\n" not in makefile:
        missing(f"the newest tree's {NET}/Makefile has another TEST_PROGS than the test expects")
    listed = makefile.replace("\tbind_bhash.sh \\\n", "\tbind_bhash.sh \\\n\tbind_pbprobe.sh \\\n")
    script = ('#!/bin/bash\n# SPDX-License-Identifier: GPL-2.0\n\nsource lib.sh\n\n'
              'echo "bind_pbprobe: ok"\nexit "$ksft_pass"\n')
    fixes = f'Fixes: {base[:12]} ("{git(repo, "log", "-1", "--format=%s", base)}")\n'
    commit = ("selftests: net: add bind_pbprobe.sh", {f"{NET}/bind_pbprobe.sh": ("100755", script.encode()),
                                                      f"{NET}/Makefile": listed.encode()})
    draft = mail_commits(repo, base, [commit], tmp_path / "draft", prefix="PATCH net", trailers=fixes)
    wanted = sorted({address for _, address, _, section in
                     by_hand_maintainers(kernel_tree_new, next(draft.glob("0001-*.patch"))) if section})
    clean = mail_commits(repo, base, [commit], tmp_path / "clean", prefix="PATCH net", trailers=fixes, cc=wanted)
    code, report = run_check(capsys, clean, repo, "netdev")
    assert {c["id"]: c["status"] for c in report["checks"]} == {**{c: "ran" for c in NETDEV}, "rules": "skipped"}
    assert found(report) == [] and code == 0
    unlisted = mail_commits(repo, base, [(commit[0], {f"{NET}/bind_pbprobe.sh": commit[1][f"{NET}/bind_pbprobe.sh"]})],
                            tmp_path / "unlisted", prefix="PATCH net", trailers=fixes, cc=wanted)
    code, report = run_check(capsys, unlisted, repo, "check-selftest")
    assert found(report) == [(1, "check-selftest", f"{NET}/bind_pbprobe.sh",
                              f"new selftest bind_pbprobe.sh is not in {NET}/Makefile")] and code == 1


FEATURES_SH = """#!/bin/bash
# SPDX-License-Identifier: GPL-2.0

source lib.sh

ip link add name pbvx0 type vxlan id 7 dstport 4789
modprobe udp_tunnel
tc qdisc add dev pbvx0 clsact
tc filter add dev pbvx0 ingress protocol ip pref 1 flower action pass
# tc qdisc add dev pbvx0 root cake: a comment asks for nothing
tc qdisc add dev pbvx0 root handle 1: plug limit 1000
exit "$ksft_pass"
"""


def test_a_new_selftest_needs_the_options_of_what_it_asks_for_in_config(kernel_tree_new, tmp_path, capsys):
    """7.2's net/config builds vxlan, clsact, flower (and udp_tunnel, which has no prompt, through
    VXLAN's select) but not the plug qdisc: adding a test that asks for all of them is reported once,
    on the plug line of its patch; the next patch adding the option to config is silent, and so is
    the test and the option in one patch."""
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree_new), str(repo))
    base = git(repo, "rev-parse", KERNELS[NEWEST].tag)
    makefile, config = (git(repo, "show", f"{base}:{NET}/{name}") + "\n" for name in ("Makefile", "config"))
    if "\tbind_bhash.sh \\\n" not in makefile or "CONFIG_NET_SCH_PLUG" in config \
            or "CONFIG_NET_SCH_NETEM=y\nCONFIG_NET_SCH_PRIO=m\n" not in config:
        missing(f"the newest tree's {NET}/Makefile or config is not the one the test expects")
    test = {f"{NET}/bind_plug.sh": ("100755", FEATURES_SH.encode()),
            f"{NET}/Makefile": makefile.replace("\tbind_bhash.sh \\\n", "\tbind_bhash.sh \\\n\tbind_plug.sh \\\n").encode()}
    option = {f"{NET}/config": config.replace("CONFIG_NET_SCH_NETEM=y\n", "CONFIG_NET_SCH_NETEM=y\nCONFIG_NET_SCH_PLUG=m\n").encode()}
    two = mail_commits(repo, base, [("selftests: net: add bind_plug.sh", test),
                                    ("selftests: net: config: add the plug qdisc", option)], tmp_path / "two")
    code, report = run_check(capsys, two, repo, "check-selftest")
    assert found(report) == [(1, "check-selftest", f"{NET}/bind_plug.sh",
                              f"'qdisc add dev pbvx0 root handle 1: plug' needs CONFIG_NET_SCH_PLUG "
                              f"(net/sched/sch_plug.o), which {NET}/config does not set")] and code == 1
    assert [f["line"] for f in report["findings"]] == [FEATURES_SH.splitlines().index(
        "tc qdisc add dev pbvx0 root handle 1: plug limit 1000") + 1]
    one = mail_commits(repo, base, [("selftests: net: add bind_plug.sh", {**test, **option})], tmp_path / "one")
    code, report = run_check(capsys, one, repo, "check-selftest")
    assert found(report) == [] and code == 0


@pytest.mark.parametrize("which", ["kernel_tree", "kernel_tree_new"])
def test_the_tree_says_what_builds_a_feature_on_both_kernels(request, which):
    """6.1 has no per-kind alias macros for qdiscs: the object named after the qdisc is found instead."""
    from patchbench.patchchecks.context import netdev_facts
    from patchbench.patchchecks.selftest_config import Provider, Providers, Use
    from patchbench.tree.git import Git

    facts = netdev_facts()["selftest"]["needs"]
    tree = Git.at(request.getfixturevalue(which))
    with tree.blobs() as blobs:
        providers = Providers(tree, blobs, "HEAD", facts["uses"], facts["sources"])
        ask = {(way, name): providers.of(Use(way, name, 1, "")) for way, name in [
            ("qdisc", "plug"), ("link", "vxlan"), ("link", "veth"), ("module", "udp_tunnel"), ("action", "pass")]}
        assert ask[("qdisc", "plug")] == [Provider("net/sched/sch_plug.o", frozenset({"CONFIG_NET_SCH_PLUG"}))]
        assert [p.options for p in ask[("link", "vxlan")]] == [frozenset({"CONFIG_VXLAN"})]
        assert ask[("link", "veth")] == [Provider("drivers/net/veth.o", frozenset({"CONFIG_VETH"}))]
        assert ask[("action", "pass")] == []   # not a feature: nothing provides it
        udp_tunnel, = ask[("module", "udp_tunnel")]
        assert providers.unset(udp_tunnel, {"CONFIG_VXLAN"}) == set()
        assert providers.unset(udp_tunnel, {"CONFIG_DUMMY"}) == {"CONFIG_NET_UDP_TUNNEL"}


# --- signed ------------------------------------------------------------------------------------

@pytest.fixture
def keyring(tmp_path, monkeypatch):
    """An ed25519 key made here; its public half in the user's patatt keyring ($XDG_DATA_HOME)."""
    import patatt
    from nacl.signing import SigningKey   # patatt's own dependency for ed25519

    key = SigningKey.generate()
    data_home = tmp_path / "data"
    public = data_home / "patatt" / "public" / patatt.make_pkey_path("ed25519", "ada@example.org", "pbtest")
    public.parent.mkdir(parents=True)
    public.write_bytes(base64.b64encode(key.verify_key.encode()))
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    return base64.b64encode(bytes(key))


def sign(mail: Path, private: bytes) -> None:
    import patatt

    mail.write_bytes(patatt.sign_message(mail.read_bytes(), "ed25519", private, "ada@example.org", "pbtest"))


def one_patch_series(tmp_path: Path) -> tuple[Path, Path, Path]:
    repo = tmp_path / "linux"
    base = make_tree(repo)
    series = mail_commits(repo, base, [("selftests: net: gamma: say more", {
        f"{NET}/gamma.sh": ("100755", (CLEAN_SH.format(name="gamma") + 'echo "done"\n').encode())})],
        tmp_path / "series")
    return repo, series, next(series.glob("0001-*.patch"))


def test_signed_a_valid_signature_or_none_is_silent_a_tampered_one_is_an_error(tmp_path, keyring, capsys):
    repo, series, mail = one_patch_series(tmp_path)
    code, report = run_check(capsys, series, repo, "signed")            # not signed: nothing to say
    assert found(report) == [] and code == 0
    sign(mail, keyring)
    assert "X-Developer-Signature: v=1; a=ed25519" in mail.read_text()
    code, report = run_check(capsys, series, repo, "signed")            # signed, and the key is known
    assert [c["status"] for c in report["checks"] if c["id"] == "signed"] == ["ran"]
    assert found(report) == [] and code == 0
    mail.write_text(mail.read_text().replace('+echo "done"', '+echo "done"; rm -f /tmp/pb'))
    code, report = run_check(capsys, series, repo, "signed")            # changed after signing
    assert [(p, rule, m.split(":")[0]) for p, rule, _, m in found(report)] == [
        (1, "signed", "the signature of ada@example.org (ed25519) does not validate")] and code == 1
    assert report["findings"][0]["severity"] == "error"


def test_signed_by_a_key_no_keyring_has_is_a_warning(tmp_path, keyring, capsys, monkeypatch):
    repo, series, mail = one_patch_series(tmp_path)
    sign(mail, keyring)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "elsewhere"))
    code, report = run_check(capsys, series, repo, "signed")
    assert [(f["severity"], f["message"].split(",")[0]) for f in report["findings"]] == [
        ("warning", "signed by ada@example.org (ed25519)")] and code == 1
