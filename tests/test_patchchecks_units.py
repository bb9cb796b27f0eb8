"""series-shape and source-hygiene on series built as the series stage builds them (no tree needed)."""

from __future__ import annotations

from pathlib import Path

from patchbench.mail.files import files_touched
from patchbench.patchchecks.checks import series_shape, source_hygiene
from patchbench.patchchecks.context import PatchContext
from patchbench.series import Cover, Patch, Series
from patchbench.tree import AppliedPatch, ApplyResult

SOB = "Signed-off-by: Ada Series <ada@example.org>"


def patch(index: int, body: str = f"Why.\n\n{SOB}\n", diff: str = "", notes: str = "",
          prefix: str = "PATCH net-next") -> Patch:
    return Patch(index=index, subject=f"subject {index}", message_id=f"m{index}@x",
                 author="Ada Series <ada@example.org>", date=None, body=body, diff=diff,
                 files=files_touched(diff) if diff else [], notes=notes, subject_prefix=prefix)


def context(patches: list[Patch], *, version: int = 1, cover: Cover | None = None, tree: str | None = "net-next",
            total: int | None = None) -> PatchContext:
    series = Series(version=version, total=total or len(patches), tree=tree, subject_prefix="PATCH net-next",
                    cover=cover, patches=patches)
    applied = ApplyResult(repo=Path("."), base="b" * 40, base_reason="", failed=None, head="c" * 40,
                          applied=[AppliedPatch(p.index, f"{p.index:040x}", "b" * 40) for p in patches])
    return PatchContext(series, applied, tree=None, scratch=Path("."))


def shape(ctx: PatchContext) -> list[tuple[int, str]]:
    return [(f.patch, f.message) for f in series_shape.run(ctx)]


COVER = Cover(subject="the series", message_id="c@x", body="What it does.\n")


def test_sixteen_patches_for_a_netdev_tree_is_an_error_fifteen_is_not():
    assert shape(context([patch(i) for i in range(1, 16)], cover=COVER)) == []
    assert shape(context([patch(i) for i in range(1, 17)], cover=COVER)) == [
        (1, "16 patches; netdev takes at most 15 in a series")]


def test_a_v2_changelog_below_the_line_or_in_the_cover_is_enough():
    missing = (1, "v2 says nowhere what changed since v1 (below --- or in the cover letter)")
    diffstat = " drivers/net/tun.c | 3 ++-\n 1 file changed, 2 insertions(+), 1 deletion(-)\n"
    assert shape(context([patch(1, notes=diffstat), patch(2)], version=2, cover=COVER)) == [missing]
    assert shape(context([patch(1, notes="v2: take the lock\n\n" + diffstat), patch(2)], version=2, cover=COVER)) == []
    cover = Cover(subject="the series", message_id="c@x", body="What it does.\n\nChanges in v2:\n- the lock\n")
    assert shape(context([patch(1), patch(2)], version=2, cover=cover)) == []


def test_tree_names_and_prefixes():
    assert shape(context([patch(1, prefix="PATCH")], tree=None)) == [
        (1, "the subject prefix [PATCH net-next] names no target tree (net or net-next?)")]
    assert shape(context([patch(1, prefix="PATCH netdev")], tree="netdev"))[0][1].startswith(
        "the subject prefix names tree 'netdev', not one of net, net-next")
    assert shape(context([patch(1), patch(2, prefix="PATCH net")], cover=COVER)) == [
        (2, "subject prefix [PATCH net] differs from patch 1's [PATCH net-next]")]


def diff_of(path: str, removed: list[str], added: list[str]) -> str:
    body = "".join(f"-{line}\n" for line in removed) + "".join(f"+{line}\n" for line in added)
    return (f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -10,{len(removed) + 1} +10,{len(added) + 1} @@\n context\n{body}")


def hygiene(path: str, removed: list[str], added: list[str]) -> list[tuple[int, str]]:
    ctx = context([patch(1, diff=diff_of(path, removed, added))])
    return [(f.line, f.message.split(":")[0]) for f in source_hygiene.run(ctx)]


def test_hygiene_reports_added_lines_with_their_new_line_number():
    assert hygiene("drivers/net/foo.c", [], ["\tdev_hold(dev);", "\tx = 1;", "static inline int f(void)"]) == [
        (11, "dev-hold-untracked"), (13, "inline-in-c")]
    header = ["static int foo_get(struct foo *f)", "static inline int g(void)", "static int foo_put(struct foo *f);"]
    assert hygiene("drivers/net/foo.h", [], header) == [(11, "static-function-in-header")]
    assert hygiene("drivers/net/foo.c", [], ['module_param(debug, int, 0444);']) == [(11, "module-param-in-net-driver")]
    assert hygiene("fs/foo.c", [], ['module_param(debug, int, 0444);']) == []


def test_hygiene_does_not_count_code_the_patch_only_moves():
    assert hygiene("drivers/net/foo.c", ["\tdev_hold(dev);"], ["\tx = 1;", "\tdev_hold(dev);"]) == []
    assert hygiene("drivers/net/foo.c", ["\tdev_hold(dev);"], ["\tdev_hold(dev);", "\tdev_hold(dev);"]) == [
        (12, "dev-hold-untracked")]   # one of the two is new: the one past the removed line's count


def test_sarif_gives_a_commit_message_finding_no_location():
    from patchbench.checks.engine.finding import Finding
    from patchbench.report import sarif

    found = [Finding("signoff", "error", "", 0, "", "no Signed-off-by: from the author", patch=1),
             Finding("checkpatch", "warning", "drivers/net/tun.c", 12, "", "LONG_LINE: too long", patch=1)]
    results = sarif.to_sarif(found)["runs"][0]["results"]
    assert results[0]["locations"] == []
    assert results[1]["locations"] == [{"physicalLocation": {"artifactLocation": {"uri": "drivers/net/tun.c"},
                                                             "region": {"startLine": 12}}}]
