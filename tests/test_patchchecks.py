"""The netdev per-patch checks (patchbench.patchchecks) on series written for them, on the 6.1 tree.

A clean series for net stays silent; a broken one has each check fire on its planted problem on
the right patch; and the checks that wrap a tree script agree with that script run by hand.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from patchbench.cli import main
from patchbench.patchchecks.checks import checkpatch, kdoc, maintainers
from tests.conftest import missing
from tests.support.git_series import git
from tests.support.kernel import KERNELS, NEWEST
from tests.support.netdev_series import (ADA, SAM, TAP, TAP_ANCHOR, TAP_LEN, TAP_LEN_INLINE, TUN, TUN_ANCHOR,
                                         TUN_COUNT, TUN_COUNT_HOLD, TUN_COUNT_UNDOCUMENTED, Change, fixes_targets,
                                         mail_series)

NETDEV = ["check-selftest", "checkpatch", "fixes-tag", "kdoc", "maintainers", "pylint", "ruff", "series-shape", "shellcheck",
          "signed", "signoff", "source-hygiene", "yamllint"]
OTHER = "Olga Other <olga@example.org>"
pytestmark = pytest.mark.kernel


def run_check(capsys, series: Path, repo: Path, *extra: str) -> tuple[int, dict]:
    code = main(["check", str(series), "--tree", str(repo), "--format", "json", *extra])
    return code, json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def targets(kernel_clone):
    repo, root = kernel_clone
    return fixes_targets(repo, root)


def clean_changes(targets) -> list[Change]:
    fixes = f'Fixes: {targets.base[:12]} ("{targets.base_subject}")'
    return [
        Change(TUN, "tun: add tun_queue_count()", "Callers want the number of attached queues without\n"
               f"reading the field themselves.\n\n{fixes}\nSigned-off-by: {ADA}",
               [(TUN_ANCHOR, TUN_COUNT + TUN_ANCHOR)]),
        Change(TAP, "tap: add tap_queue_len()", "The ring size is read in one place from now on.\n\n"
               f"{fixes}\nSigned-off-by: {ADA}", [(TAP_ANCHOR, TAP_LEN + TAP_ANCHOR)]),
        Change(TUN, "tun: read the queue count once in tun_ring_recv()", "Keep the helper next to its user.\n\n"
               f"{fixes}\nSigned-off-by: {ADA}", [("\tDECLARE_WAITQUEUE(wait, current);\n\tvoid *ptr = NULL;\n",
                                                   "\tDECLARE_WAITQUEUE(wait, current);\n\tvoid *ptr = NULL;\n\n"
                                                   "\t/* the count is read once, here */\n")]),
    ]


def by_hand_maintainers(kernel_tree: Path, mail: Path) -> list[str]:
    """get_maintainer.pl run in the 6.1 checkout on one mailed patch, as a maintainer would."""
    out = subprocess.run(["perl", "scripts/get_maintainer.pl", *maintainers.OPTIONS, str(mail)], cwd=kernel_tree,
                         capture_output=True, text=True, check=True).stdout
    return [(line, address, role, section) for line, address, role, section in maintainers.parse(out)]


@pytest.fixture(scope="module")
def clean(kernel_clone, kernel_tree, targets, tmp_path_factory):
    """The clean series, mailed to everyone get_maintainer.pl names for it (run by hand)."""
    repo, _ = kernel_clone
    out = tmp_path_factory.mktemp("clean")
    mail_series(repo, targets.base, clean_changes(targets), out / "draft")
    wanted = {address for mail in sorted((out / "draft").glob("000[1-9]-*.patch"))
              for _, address, _, section in by_hand_maintainers(kernel_tree, mail) if section}
    return mail_series(repo, targets.base, clean_changes(targets), out / "series", cc=sorted(wanted))


def test_a_clean_series_for_net_has_no_findings(kernel_clone, clean, capsys):
    code, report = run_check(capsys, clean, kernel_clone[0], "--checks", "netdev")
    assert report["findings"] == []
    assert {c["id"]: c["status"] for c in report["checks"]} == {**{c: "ran" for c in NETDEV}, "rules": "skipped"}
    assert all(c["seconds"] >= 0 for c in report["checks"]) and code == 0


def broken_changes(targets) -> list[Change]:
    good = f'Fixes: {targets.base[:12]} ("{targets.base_subject}")'
    return [
        # signed off by someone else only; a Fixes: commit newer than the base
        Change(TUN, "tun: add tun_queue_count()", "Callers want the number of attached queues.\n\n"
               f'{good}\nFixes: {targets.newer[:12]} ("{targets.newer_subject}")\nSigned-off-by: {OTHER}',
               [(TUN_ANCHOR, TUN_COUNT + TUN_ANCHOR)]),
        # sent by Sam, who signs off before the author; a Fixes: whose subject is wrong; inline in a
        # .c file with the brace on the definition's line; another prefix
        Change(TAP, "tap: add tap_queue_len()", "The ring size is read in one place from now on.\n\n"
               f'Fixes: {targets.base[:12]} ("tun: something else")\nSigned-off-by: {SAM}\nSigned-off-by: {ADA}',
               [(TAP_ANCHOR, TAP_LEN_INLINE + TAP_ANCHOR)], sender=SAM, prefix="PATCH net-next v2"),
        # no description; a Fixes: of no commit, 8 digits; signs twice; dev_hold(); an undocumented
        # kernel-doc parameter
        Change(TUN, "tun: add tun_queue_count_held()", f"Fixes: 0123abcd (\"tun: never was\")\n"
               f"Signed-off-by: {ADA}\nSigned-off-by: {ADA}",
               [(TUN_ANCHOR, TUN_COUNT_UNDOCUMENTED.replace("tun_queue_count", "tun_queue_count_held")
                 + TUN_COUNT_HOLD.replace("tun_queue_count", "tun_queue_count_peek") + TUN_ANCHOR)]),
    ]


@pytest.fixture(scope="module")
def broken(kernel_clone, kernel_tree, targets, tmp_path_factory, clean):
    """v2, no cover letter, no changelog; patches 1-2 mailed to netdev and its maintainers, 3 to nobody."""
    repo, _ = kernel_clone
    netdev = sorted({address for mail in sorted(clean.glob("0001-*.patch"))
                     for _, address, _, section in by_hand_maintainers(kernel_tree, mail) if section})
    out = mail_series(repo, targets.base, broken_changes(targets), tmp_path_factory.mktemp("broken") / "series",
                      cover=False, version=2)
    for mail in sorted(out.glob("*.patch"))[:2]:
        text = mail.read_text()
        mail.write_text(text.replace("\nSubject:", "\nCc: " + ", ".join(netdev) + "\nSubject:", 1))
    return out


@pytest.fixture(scope="module")
def broken_report(kernel_clone, broken):
    import io
    from contextlib import redirect_stdout

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        code = main(["check", str(broken), "--tree", str(kernel_clone[0]), "--format", "json", "--checks", "netdev"])
    return code, json.loads(buffer.getvalue())


def findings_of(report: dict, rule: str) -> list[tuple[int, str]]:
    return [(f["patch"], f["message"]) for f in report["findings"] if f["rule"] == rule]


def test_signoff_fires_on_the_right_patches(broken_report):
    code, report = broken_report
    found = findings_of(report, "signoff")
    assert code == 1
    assert (1, f"no Signed-off-by: from the author {ADA}") in found
    assert (2, f"the sender {SAM} signs off, but not last") in found
    assert (3, f"Signed-off-by: {ADA} appears more than once") in found
    assert len(found) == 3


def test_fixes_tag_missing_commit_wrong_subject_newer_than_base(broken_report, targets):
    found = findings_of(broken_report[1], "fixes-tag")
    newer = f'Fixes: {targets.newer[:12]} ("{targets.newer_subject}")'
    assert (1, f"{newer} is newer than the base {targets.base[:12]}") in found
    assert (2, f'Fixes: {targets.base[:12]} quotes ("tun: something else") but that commit is '
               f'("{targets.base_subject}")') in found
    assert (3, "Fixes: 0123abcd names no commit of this repository") in found
    assert (3, "Fixes: 0123abcd has 8 hex digits; use at least 12") in found
    # the right Fixes: of patch 1 says nothing
    assert [p for p, _ in found].count(1) == 1 and len(found) == 4


def test_checkpatch_fires_on_the_patch_with_the_brace(broken_report):
    found = findings_of(broken_report[1], "checkpatch")
    assert any(p == 2 and m.startswith("OPEN_BRACE: ") for p, m in found)
    assert not any(m.startswith("OPEN_BRACE") for p, m in found if p != 2)


def test_maintainers_fires_on_the_patch_mailed_to_nobody(broken_report):
    found = findings_of(broken_report[1], "maintainers")
    assert [p for p, _ in found] == [3]
    assert found[0][1].startswith("no maintainer and no list of NETWORKING DRIVERS is in To/Cc (get_maintainer.pl names ")


def test_kdoc_fires_on_the_undocumented_parameter(broken_report):
    found = [(f["patch"], f["file"], f["message"]) for f in broken_report[1]["findings"] if f["rule"] == "kdoc"]
    assert found and all(p == 3 and path == TUN for p, path, _ in found)
    assert any("'tun'" in message and "tun_queue_count_held" in message for _, _, message in found)


def test_series_shape_fires_on_series_and_patch(broken_report):
    found = findings_of(broken_report[1], "series-shape")
    assert (1, "3 patches without a cover letter") in found
    assert (1, "v2 says nowhere what changed since v1 (below --- or in the cover letter)") in found
    assert (2, "subject prefix [PATCH net-next] differs from patch 1's [PATCH net]") in found
    assert (3, "no description: the commit message has only its subject and trailers") in found
    assert len(found) == 4


def test_source_hygiene_fires_on_inline_and_dev_hold(broken_report):
    found = [(f["patch"], f["message"].split(":")[0]) for f in broken_report[1]["findings"]
             if f["rule"] == "source-hygiene"]
    assert sorted(found) == [(2, "inline-in-c"), (3, "dev-hold-untracked"), (3, "dev-hold-untracked")]


def test_text_and_terse_carry_the_netdev_findings(kernel_clone, broken, capsys):
    code = main(["check", str(broken), "--tree", str(kernel_clone[0]), "--checks", "signoff,series-shape"])
    text = capsys.readouterr().out
    assert code == 1
    # A commit-message finding has no file:line and no function: the severity and rule, then the message.
    assert f"  error: [signoff]\n      no Signed-off-by: from the author {ADA}" in text
    assert "  warning: [series-shape]\n      3 patches without a cover letter" in text


def format_patches(repo: Path, report: dict, out: Path) -> list[Path]:
    """The applied commits as git format-patch -M writes them: what a maintainer runs scripts on."""
    return [Path(git(repo, "format-patch", "-M", "-1", "-o", str(out), patch["commit"], "--start-number",
                     str(patch["index"]))) for patch in report["patches"]]


def test_checkpatch_types_are_those_of_checkpatch_run_by_hand(kernel_clone, kernel_tree, broken_report, tmp_path):
    repo, report = kernel_clone[0], broken_report[1]
    ours = sorted((f["patch"], f["message"].split(":")[0]) for f in report["findings"] if f["rule"] == "checkpatch")
    by_hand = []
    for index, mail in enumerate(format_patches(repo, report, tmp_path / "mails"), 1):
        proc = subprocess.run(["perl", str(kernel_tree / "scripts/checkpatch.pl"), "--root", str(kernel_tree),
                               *checkpatch.command_options(False), str(mail)], cwd=tmp_path, capture_output=True,
                              text=True, env={**os.environ, "GIT_DIR": str(repo / ".git")})
        by_hand += [(index, kind) for _, kind, *_ in checkpatch.parse(proc.stdout)]
    assert ours == sorted(by_hand) and ("OPEN_BRACE" in {kind for _, kind in by_hand})


def test_maintainers_missing_are_the_addresses_get_maintainer_gives_by_hand(kernel_clone, kernel_tree, broken_report,
                                                                           tmp_path):
    report = broken_report[1]
    mail = format_patches(kernel_clone[0], report, tmp_path / "mails")[2]
    by_hand = {address for _, address, role, section in by_hand_maintainers(kernel_tree, mail)
               if section and ("list" in role or role in maintainers.MAINTAINER_ROLES)}
    (message,) = [m for p, m in findings_of(report, "maintainers") if p == 3]
    ours = set(message.removesuffix(")").split(" names ", 1)[1].split(", "))
    assert ours == by_hand and len(by_hand) >= 2


def test_kdoc_warnings_are_those_of_kernel_doc_run_by_hand(kernel_clone, kernel_tree, broken_report, tmp_path):
    repo, report = kernel_clone[0], broken_report[1]
    patch = report["patches"][2]
    texts = {}
    for rev, name in ((f"{patch['commit']}~1", "before"), (patch["commit"], "after")):
        (tmp_path / name / "drivers/net").mkdir(parents=True)
        (tmp_path / name / TUN).write_text(git(repo, "show", f"{rev}:{TUN}") + "\n")
        proc = subprocess.run(["perl", str(kernel_tree / "scripts/kernel-doc"), "-none", TUN], cwd=tmp_path / name,
                              capture_output=True, text=True)
        texts[name] = {(kind, text) for kind, _, _, text in kdoc.parse(proc.stderr)}
    ours = {(f["severity"], f["message"]) for f in report["findings"] if f["rule"] == "kdoc"}
    assert ours == texts["after"] - texts["before"] and ours


def test_checks_needing_scripts_are_skipped_on_a_tree_without_them(tmp_path, capsys):
    example = Path(__file__).resolve().parents[1] / "fixtures" / "example"
    subprocess.run(["sh", str(example / "make-tree.sh"), str(tmp_path / "tree")], check=True, capture_output=True)
    code, report = run_check(capsys, example / "series.mbox", tmp_path / "tree", "--checks", "netdev")
    status = {c["id"]: (c["status"], c["reason"]) for c in report["checks"]}
    assert status["checkpatch"] == ("skipped", "the base tree has no scripts/checkpatch.pl")
    assert status["kdoc"] == ("skipped", "the base tree has no scripts/kernel-doc")
    assert status["maintainers"][0] == "skipped"
    assert {status[c][0] for c in ("signoff", "fixes-tag", "series-shape", "source-hygiene")} == {"ran"}
    assert code == 0 and report["findings"] == []


def test_an_unknown_check_is_bad_input(tmp_path, capsys):
    example = Path(__file__).resolve().parents[1] / "fixtures" / "example"
    assert main(["check", str(example / "series.mbox"), "--tree", str(tmp_path), "--checks", "nope"]) == 2
    assert capsys.readouterr().err.startswith("patchbench: error: --checks: unknown check 'nope'")


def test_each_check_runs_on_the_newest_tree(kernel_tree_new, tmp_path, capsys):
    """Once on the newest kernel: the scripts there (a python kernel-doc) run and find the planted problems."""
    repo = tmp_path / "linux"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(kernel_tree_new), str(repo))
    base = git(repo, "rev-parse", KERNELS[NEWEST].tag)
    if not git(repo, "ls-tree", base, "--", TUN):
        missing(f"the newest tree has no {TUN}")
    anchor = next(line + "\n" for line in git(repo, "show", f"{base}:{TUN}").splitlines()
                  if re.match(r"^static void \*tun_ring_recv\(", line))
    change = Change(TUN, "tun: add tun_queue_count()", f"Callers want the count.\n\nSigned-off-by: {ADA}",
                    [(anchor, TUN_COUNT_UNDOCUMENTED + TAP_LEN_INLINE.replace("tap_queue_len", "tun_len")
                      .replace("struct tap_queue *q", "struct tun_file *q").replace("q->ring.size", "q->tx_ring.size")
                      + anchor)])
    series = mail_series(repo, base, [change], tmp_path / "series", prefix="PATCH net-next")
    code, report = run_check(capsys, series, repo, "--checks", "netdev")
    assert {c["id"]: c["status"] for c in report["checks"]} == {**{c: "ran" for c in NETDEV}, "rules": "skipped"}
    rules = {(f["rule"], f["message"].split(":")[0]) for f in report["findings"]}
    assert ("checkpatch", "OPEN_BRACE") in rules and ("source-hygiene", "inline-in-c") in rules
    kdoc_found = [f["message"] for f in report["findings"] if f["rule"] == "kdoc"]
    assert len(kdoc_found) == 1 and "'tun'" in kdoc_found[0], kdoc_found   # not twice, as 7.2's prints it
    assert any(f["rule"] == "maintainers" and f["message"].startswith("no maintainer and no list of")
               and "NETWORKING DRIVERS" in f["message"] and "netdev@vger.kernel.org" in f["message"]
        for f in report["findings"]) and code == 1


def test_a_directory_pattern_without_slash_still_names_its_section(kernel_clone, kernel_tree, targets, tmp_path,
                                                                   capsys):
    """MAINTAINERS says `F: drivers/net/ethernet/google` (no slash): get_maintainer.pl, by hand in a
    checkout, names GOOGLE ETHERNET DRIVERS for a file below it; so must the check, without a checkout."""
    gve = "drivers/net/ethernet/google/gve/gve_main.c"
    change = Change(gve, "gve: say where the driver is documented", f"Readers look for it.\n\nSigned-off-by: {ADA}",
                    [("/* Google virtual Ethernet (gve) driver\n",
                      "/* Google virtual Ethernet (gve) driver (see its gve.rst)\n")])
    series = mail_series(kernel_clone[0], targets.base, [change], tmp_path / "series", prefix="PATCH net-next",
                         cc=["netdev@vger.kernel.org"])
    code, report = run_check(capsys, series, kernel_clone[0], "--checks", "maintainers")
    ours = {m.split(" is not in")[0] for _, m in findings_of(report, "maintainers")}
    mail = sorted(series.glob("0001-*.patch"))[0]
    by_hand = {f"{who} ({role}:{section})" for who, address, role, section in by_hand_maintainers(kernel_tree, mail)
               if section and ("list" in role or role in maintainers.MAINTAINER_ROLES)
               and address != "netdev@vger.kernel.org"}
    assert ours == by_hand and any("GOOGLE ETHERNET DRIVERS" in who for who in ours) and code == 1


def test_directory_patterns_slash_only_plain_directories():
    text = "X\nF:\tdrivers/net/foo\nF:\tdrivers/net/foo.c\nF:\tdrivers/net/bar/\nF:\tdrivers/net/a.b\nK:\tfoo\n"
    rewritten = maintainers.directory_patterns(text, {"drivers/net/foo", "drivers/net/a.b"})
    assert rewritten == text.replace("F:\tdrivers/net/foo\n", "F:\tdrivers/net/foo/\n")
    assert rewritten != text


def test_a_fix_for_net_without_fixes_is_a_warning_but_not_for_net_next(kernel_clone, targets, tmp_path, capsys):
    change = Change(TAP, "tap: add tap_queue_len()", f"The ring size is read in one place.\n\nSigned-off-by: {ADA}",
                    [(TAP_ANCHOR, TAP_LEN + TAP_ANCHOR)])
    found = {}
    for tree in ("net", "net-next"):
        series = mail_series(kernel_clone[0], targets.base, [change], tmp_path / tree, prefix=f"PATCH {tree}")
        _, report = run_check(capsys, series, kernel_clone[0], "--checks", "fixes-tag")
        found[tree] = findings_of(report, "fixes-tag")
    assert found == {"net": [(1, "a patch for net without a Fixes: tag")], "net-next": []}


def test_a_new_file_must_fall_in_a_maintainers_section(kernel_clone, targets, tmp_path, capsys):
    changes = [Change("drivers/net/tun_stats.c", "tun: add tun_stats.c",
                      f"Statistics live here.\n\nSigned-off-by: {ADA}",
                      [("", "// SPDX-License-Identifier: GPL-2.0\n/* tun statistics */\n")]),
               Change("drivers/tun_orphan.c", "drivers: add tun_orphan.c", f"Nobody owns it.\n\nSigned-off-by: {ADA}",
                      [("", "// SPDX-License-Identifier: GPL-2.0\n/* no section */\n")])]
    series = mail_series(kernel_clone[0], targets.base, changes, tmp_path / "series", prefix="PATCH net-next")
    _, report = run_check(capsys, series, kernel_clone[0], "--checks", "maintainers")
    assert [(f["patch"], f["file"], f["message"]) for f in report["findings"] if f["file"]] == [
        (2, "drivers/tun_orphan.c", "new file in no MAINTAINERS section (only THE REST)")]


def test_signoff_matches_the_author_through_the_mailmap(kernel_clone, targets, tmp_path, capsys):
    """6.1's .mailmap maps <abel.vesa@nxp.com> to Abel Vesa <abelvesa@kernel.org>: an author writing
    from the old address with another spelling of the name has signed off as Abel Vesa."""
    old, new = "A. Vesa <abel.vesa@nxp.com>", "Abel Vesa <abelvesa@kernel.org>"
    mailmap = git(kernel_clone[0], "show", f"{targets.base}:.mailmap")
    assert "Abel Vesa <abelvesa@kernel.org> <abel.vesa@nxp.com>" in mailmap
    found = {}
    for signer in (new, "Abel Vesa <abel@example.org>".replace("Abel Vesa", "Someone Else")):
        change = Change(TAP, "tap: add tap_queue_len()", f"The ring size is read once.\n\nSigned-off-by: {signer}",
                        [(TAP_ANCHOR, TAP_LEN + TAP_ANCHOR)], author=old)
        series = mail_series(kernel_clone[0], targets.base, [change], tmp_path / signer.split()[0],
                             prefix="PATCH net-next")
        _, report = run_check(capsys, series, kernel_clone[0], "--checks", "signoff")
        found[signer] = findings_of(report, "signoff")
    assert found == {new: [], "Someone Else <abel@example.org>": [(1, f"no Signed-off-by: from the author {old}")]}


def test_checkpatch_runs_with_netdevs_options(kernel_clone, targets, tmp_path, capsys):
    """As netdev's CI runs it: --strict outside networking too, lines over 80 columns, codespell's
    misspellings, and the types netdev ignores (CAMELCASE) left out."""
    change = Change("drivers/misc/pb_empty.c", "misc: add pb_empty()",
                    f"Say whether it is empty.\n\nSigned-off-by: {ADA}",
                    [("", "// SPDX-License-Identifier: GPL-2.0\n#include <linux/types.h>\n\n"
                          "bool pb_empty(const int *p);\n\n/* the pointer is recieved from the caller */\n"
                          "bool pb_empty(const int *p)\n{\n\tint notNull = p != NULL;\n\n"
                          "\treturn p == NULL || !notNull || pb_empty_one_more_time_with_a_long_name(p, 1, 2);\n}\n")])
    series = mail_series(kernel_clone[0], targets.base, [change], tmp_path / "series", prefix="PATCH net-next")
    _, report = run_check(capsys, series, kernel_clone[0], "--checks", "checkpatch")
    kinds = {(f["severity"], f["message"].split(":")[0]) for f in report["findings"]}
    assert {("note", "COMPARISON_TO_NULL"), ("warning", "TYPO_SPELLING"), ("warning", "LONG_LINE")} <= kinds
    assert not any(kind == "CAMELCASE" for _, kind in kinds), kinds


def test_run_takes_checks_too(tmp_path, capsys):
    example = Path(__file__).resolve().parents[1] / "fixtures" / "example"
    subprocess.run(["sh", str(example / "make-tree.sh"), str(tmp_path / "tree")], check=True, capture_output=True)
    code = main(["run", str(example / "series.mbox"), "--tree", str(tmp_path / "tree"), "--format", "json",
                 "--checks", "rules,signoff"])
    report = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in report["checks"]] == ["rules", "signoff"] and report["jobs"] == []
    assert [f["rule"] for f in report["findings"]] == ["ptr-ring-consume-unlocked"] and code == 1


def test_a_tree_script_that_crashes_is_an_error_not_a_pass(tmp_path, capsys):
    """The base's checkpatch.pl dies: exit 2 with one line, no findings report, no scratch left behind."""
    example = Path(__file__).resolve().parents[1] / "fixtures" / "example"
    tree = tmp_path / "tree"
    subprocess.run(["sh", str(example / "make-tree.sh"), str(tree)], check=True, capture_output=True)
    (tree / "scripts").mkdir()
    (tree / "scripts" / "checkpatch.pl").write_text("#!/usr/bin/env perl\ndie \"cannot start\\n\";\n")
    git(tree, "add", "scripts/checkpatch.pl")
    git(tree, "commit", "-q", "-m", "scripts: a checkpatch.pl that dies")
    scratch_before = set(Path(tempfile.gettempdir()).glob("patchbench-netdev-*"))
    code = main(["check", str(example / "series.mbox"), "--tree", str(tree), "--base", "HEAD", "--checks", "checkpatch"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines() == ["patchbench: error: scripts/checkpatch.pl failed (exit 255): cannot start"]
    assert set(Path(tempfile.gettempdir()).glob("patchbench-netdev-*")) == scratch_before
