"""The rows of ../shared/corpus/EXPECTED.md, with our own expected values, plus: every corpus file is
read with nothing but a result or a clean BadInput."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from patchbench.errors import BadInput
from patchbench.series import find_series, load_series

# patchwork/series: (cover letters, patches per posting in order of appearance)
PATCHWORK_SERIES = {
    "base-single-patch": (0, [1]),
    "base-cover-letter": (1, [2]),
    "base-no-cover-letter": (0, [2]),
    "base-deep-threaded": (1, [2]),
    "base-out-of-order": (1, [2]),
    "base-incomplete": (1, [1]),
    "base-extra-patches": (1, [3]),
    "base-different-versions": (1, [4]),
    "base-no-references": (0, [2]),
    "base-no-references-no-cover": (1, [2]),
    "bugs-multiple-references": (1, [4]),
    "bugs-multiple-content-types": (0, [1]),
    "bugs-unnumbered": (1, [1, 1]),
    "bugs-nocover": (0, [2, 2]),
    "bugs-nocover-noversion": (0, [2, 2]),
    "bugs-mixed-versions": (0, [1, 1]),
    "bugs-spamming": (0, [1, 1, 1]),
    "revision-basic": (2, [2, 2]),
    "revision-threaded-to-cover": (2, [2, 2]),
    "revision-threaded-to-patch": (2, [2, 2]),
    "revision-out-of-order": (2, [2, 2]),
    "revision-threaded-to-single-patch": (0, [1, 1]),
    "revision-no-cover-letter": (1, [2, 2]),
    "revision-unlabeled": (2, [2, 2]),
    "revision-unlabeled-noreferences": (0, [2, 2]),
    "mercurial-cover-letter": (1, [2]),
    "mercurial-no-cover-letter": (0, [2]),
    "dependency-base-patch": (1, [2]),
}


@pytest.mark.parametrize("name", sorted(PATCHWORK_SERIES))
def test_patchwork_series_split(corpus, name):
    covers, sizes = PATCHWORK_SERIES[name]
    postings = [s for topic in find_series(str(corpus / "patchwork" / "series" / f"{name}.mbox")) for s in topic]
    # a partial posting may borrow parts from an older version; count only what this posting sent
    posted = [[p for p in s.patches if p.version == s.version] for s in postings]
    assert sorted(len(p) for p in posted) == sorted(sizes)
    assert sum(1 for s in postings if s.cover) == covers


@pytest.mark.parametrize("name, version, others, tree, missing, indexes", [
    ("revision-basic", 2, [1], None, [], [1, 2]),
    ("base-different-versions", 3, [], "net-next", [], [1, 2, 3, 4]),
    ("base-no-references", 2, [], "net", [], [1, 2]),
    ("base-incomplete", 1, [], None, [2], [1]),
    ("base-extra-patches", 1, [], None, [], [1, 2, 3]),
    ("bugs-nocover", 2, [1], None, [], [1, 2]),
    ("mercurial-cover-letter", 1, [], None, [], [1, 2]),
])
def test_patchwork_selected_version(corpus, name, version, others, tree, missing, indexes):
    series = load_series(str(corpus / "patchwork" / "series" / f"{name}.mbox"))
    assert (series.version, series.other_versions, series.tree) == (version, others, tree)
    assert series.missing == missing
    assert [p.index for p in series.patches] == indexes


def test_older_version_on_request(corpus):
    series = load_series(str(corpus / "patchwork" / "series" / "revision-basic.mbox"), version=1)
    assert series.version == 1 and series.other_versions == [2]
    with pytest.raises(BadInput, match="no version 5"):
        load_series(str(corpus / "patchwork" / "series" / "revision-basic.mbox"), version=5)


def test_cover_letter_named_and_out_of_order(corpus):
    series = load_series(str(corpus / "patchwork" / "series" / "base-out-of-order.mbox"))
    assert series.cover is not None and [p.index for p in series.patches] == [1, 2]
    assert load_series(str(corpus / "patchwork" / "series" / "base-cover-letter.mbox")).title == "A sample series"


PULL_REQUESTS = ["0001-git-pull-request", "0002-git-pull-request-wrapped", "0004-git-pull-request-git+ssh",
                 "0005-git-pull-request-ssh", "0006-git-pull-request-http", "0017-git-pull-request-git-2-14-3",
                 "0020-multipart-comment", "0023-git-pull-request-newline-in-url",
                 "0024-git-pull-request-trailing-space"]


@pytest.mark.parametrize("name", PULL_REQUESTS)
def test_mail_without_diff_is_no_patch(corpus, name):
    with pytest.raises(BadInput, match="no patch found"):
        load_series(str(corpus / "patchwork" / "mail" / f"{name}.mbox"))


def _only_patch(path: Path):
    series = load_series(str(path))
    assert len(series.patches) == 1
    return series.patches[0]


@pytest.mark.parametrize("name, first_file, statuses", [
    ("0003-git-pull-request-with-diff", "arch/x86/include/asm/smp.h", None),
    ("0007-cvs-format-diff", "bfd/elf-bfd.h", None),
    ("0008-git-rename", None, ["renamed", "renamed"]),
    ("0009-git-rename-with-diff", None, ["renamed", "renamed"]),
    ("0010-invalid-charset", None, None),
    ("0012-invalid-header-char", None, None),
    ("0013-with-utf8-body", "MAINTAINERS", None),
    ("0014-with-unencoded-utf8-headers", "MAINTAINERS", None),
    ("0015-with-invalid-utf8-headers", "MAINTAINERS", None),
    ("0016-no-subject", None, ["renamed", "renamed"]),
    ("0021-git-empty-new-file", "banana", ["added"]),
    ("0022-git-mode-change", None, ["mode"]),
    ("0025-git-add-binary-file", "pixel.bmp", ["added"]),
    ("0026-git-add-mixed-binary-text-files", "pixel.bmp", ["added", "added"]),
    ("0027-git-modify-binary-file", "pixel.bmp", ["binary"]),
])
def test_patchwork_single_mails(corpus, name, first_file, statuses):
    patch = _only_patch(corpus / "patchwork" / "mail" / f"{name}.mbox")
    assert patch.files, "a patch must touch files"
    if first_file:
        assert patch.files[0].path == first_file
    if statuses:
        assert [f.status for f in patch.files] == statuses


def test_no_newline_markers_stay_in_the_diff(corpus):
    patch = _only_patch(corpus / "patchwork" / "mail" / "0011-no-newline-at-end-of-file.mbox")
    assert patch.diff.count("\\ No newline at end of file") == 2
    assert "No newline" not in patch.body
    assert patch.diff.startswith("diff --git a/tools/testing/selftests/powerpc/Makefile")


def test_html_alternative_is_ignored(corpus):
    patch = _only_patch(corpus / "patchwork" / "mail" / "0019-multipart-patch.mbox")
    assert "<div" not in patch.diff and "<div" not in patch.body


def test_binary_files_are_marked(corpus):
    patch = _only_patch(corpus / "patchwork" / "mail" / "0026-git-add-mixed-binary-text-files.mbox")
    assert [(f.path, f.binary) for f in patch.files] == [("pixel.bmp", True), ("quit.sh", False)]


def _patchew(corpus, name):
    return str(corpus / "patchew" / "data" / name)


def test_patchew_simple_patch(corpus):
    series = load_series(_patchew(corpus, "0001-simple-patch.mbox.gz"))
    patch = series.patches[0]
    assert patch.subject == "quorum: Only compile when supported"
    assert patch.message_id == "20160628014747.20971-1-famz@redhat.com"
    assert patch.date.astimezone(timezone.utc).replace(tzinfo=None) == datetime(2016, 6, 28, 1, 47, 47)
    assert patch.author.startswith("Fam Zheng <")
    assert (series.version, series.total, series.missing, series.cover) == (1, 1, [], None)


def test_patchew_review_from_reply(corpus):
    patch = load_series(_patchew(corpus, "0003-single-patch-reviewed.mbox.gz")).patches[0]
    assert "Reviewed-by: Aurelien Jarno <aurelien@aurel32.net>" in patch.trailers


def test_patchew_unusual_case_trailers_kept_verbatim(corpus):
    trailers = load_series(_patchew(corpus, "0002-unusual-cased-tags.mbox.gz")).patches[0].trailers
    assert any(t.startswith("Reviewed-By: ") for t in trailers)
    assert any(t.startswith("tESTed-bY: ") for t in trailers)


def test_patchew_cover_review_applies_to_every_patch(corpus):
    series = load_series(_patchew(corpus, "0004-multiple-patch-reviewed.mbox.gz"))
    assert (series.version, series.total, series.missing) == (4, 2, [])
    assert series.cover is not None
    for patch in series.patches:
        assert any(t.startswith("Reviewed-by: Eric Blake") for t in patch.trailers)


def test_patchew_incomplete(corpus):
    series = load_series(_patchew(corpus, "0012-incomplete-series.mbox.gz"))
    assert (series.version, series.total, series.missing, len(series.patches)) == (4, 2, [2], 1)


@pytest.mark.parametrize("name", ["0009-obsolete-by.mbox.gz", "0030-obsolete-by-v3.mbox.gz"])
def test_patchew_unthreaded_versions(corpus, name):
    series = load_series(_patchew(corpus, name))
    assert (series.version, series.other_versions) == (3, [1, 2])


@pytest.mark.parametrize("name, status, count", [("0021-mode-only-patch.mbox.gz", "mode", 9),
                                                  ("0034-rename-only-patch.mbox.gz", "renamed", 4)])
def test_patchew_header_only_changes(corpus, name, status, count):
    files = load_series(_patchew(corpus, name)).patches[0].files
    assert [f.status for f in files] == [status] * count
    assert not any(f.added or f.removed for f in files)


def test_patchew_qp_binary_and_renames(corpus):
    files = load_series(_patchew(corpus, "0029-diffstat-in-patch.gz")).patches[0].files
    assert [(f.path, f.status) for f in files] == [
        ("api/models.py", "modified"), ("tests/data/0008-complex-diffstat.mbox.gz", "binary"),
        ("tests/test_model.py", "modified")]
    assert (sum(f.added for f in files), sum(f.removed for f in files)) == (15, 84)
    renamed = [f for f in load_series(_patchew(corpus, "0008-complex-diffstat.mbox.gz")).patches[0].files
               if f.status == "renamed"]
    assert [(f.old_path, f.path) for f in renamed] == [
        ("hw/i2c/i2c-ddc.c", "hw/display/i2c-ddc.c"), ("include/hw/i2c/i2c-ddc.h", "include/hw/display/i2c-ddc.h")]


def test_patchew_decoding(corpus):
    assert load_series(_patchew(corpus, "0035-rfc2047-from.mbox.gz")).patches[0].author.endswith(
        "<AIERPATIJIANG1@kingsoft.com>")
    assert "Signed-off-by" in load_series(_patchew(corpus, "0038-octet-stream.mbox.gz")).patches[0].body
    raw_diff = load_series(_patchew(corpus, "0033-raw-diff.mbox.gz")).patches[0]
    assert [f.path for f in raw_diff.files] == ["xen/common/memory.c"]
    latin1 = load_series(_patchew(corpus, "0028-tags-need-8bit-encoding.mbox.gz")).patches[0]
    assert "SynICState *synic = get_synic(cs);" in latin1.diff
    assert any("Philippe Mathieu-Daudé" in t for t in latin1.trailers)


@pytest.mark.parametrize("name", ["0005-non-utf-8.mbox.gz", "0006-multi-part-non-utf-8.mbox.gz",
                                  "0010-invalid-byte.mbox.gz", "0016-nested-multipart.mbox.gz",
                                  "0022-another-simple-patch.json.gz"])
def test_patchew_no_patch(corpus, name):
    with pytest.raises(BadInput, match="no patch found"):
        load_series(_patchew(corpus, name))


def test_b4_naked_cover(corpus):
    samples = corpus / "b4" / "samples"
    series = load_series(str(samples / "naked-cover-single.mbox"))
    assert series.cover is not None and series.cover.subject == "do a thing to the widget subsystem"
    assert load_series(str(samples / "naked-cover-bugreport.mbox")).cover is None


def test_b4_partial_reroll(corpus):
    series = load_series(str(corpus / "b4" / "samples" / "trailers-followup-partial-reroll.mbox"))
    assert series.version == 3 and series.other_versions == [2]
    assert [(p.index, p.version) for p in series.patches] == [(1, 2), (2, 3)]
    assert series.cover is not None and series.missing == []


@pytest.mark.parametrize("name, count", [("trailers-test-simple.txt", 4), ("trailers-test-extinfo.txt", 6)])
def test_b4_own_trailers(corpus, name, count):
    trailers = load_series(str(corpus / "b4" / "samples" / name)).patches[0].trailers
    assert len(trailers) == count
    if name.endswith("extinfo.txt"):
        assert trailers[-1] == "Signed-off-by: Wrapped Persontrailer <broken@example.com>"


def test_b4_base_commit(corpus):
    series = load_series(str(corpus / "b4" / "samples" / "shazam-git1-just-series.mbox"))
    assert series.base_commit == "f435c12df7c0ecf20ab8937859e63cddffacabb4"


@pytest.mark.parametrize("name", ["good.mbox", "nokey.mbox", "bad.mbox", "nosig.mbox"])
def test_nipa_single_parts(corpus, name):
    series = load_series(str(corpus / "nipa" / "signed-selftest" / name))
    assert (series.version, series.total, [p.index for p in series.patches]) == (3, 8, [1])
    assert series.missing == list(range(2, 9))
    assert series.patches[0].subject == "rapidio: Avoid bogus __alloc_size warning"


T4013 = {
    "--stdout_initial..side": (None, [1]),
    "--stdout_initial..main^": (None, [1, 2]),
    "--stdout_initial..main": (None, [1, 2, 3]),
    "--stdout_--numbered_initial..main": (None, [1, 2, 3]),
    "--stdout_--cover-letter_-n_initial..main^": ("*** SUBJECT HERE ***", [1, 2]),
    "--inline_--stdout_initial..main": (None, [1, 2, 3]),
    "--inline_--stdout_--subject-prefix=TESTCASE_initial..main": (None, [1, 2, 3]),
    "--attach_--stdout_initial..main": (None, [1, 2, 3]),
    "--attach_--stdout_--suffix=.diff_initial..side": (None, [1]),
    "--attach_--stdout_initial..side": (None, [1]),
    "--attach_--stdout_initial..main^": (None, [1, 2]),
    "--inline_--stdout_initial..side": (None, [1]),
    "--inline_--stdout_initial..main^^": (None, [1]),
    "--inline_--stdout_initial..main^": (None, [1, 2]),
    "--inline_--stdout_--numbered-files_initial..main": (None, [1, 2, 3]),
    # three unthreaded, unnumbered patches are three series (as patchwork counts them): the first is
    # taken, the other two are named
    "--stdout_--no-numbered_initial..main": (None, [1]),
}


@pytest.mark.parametrize("variant", sorted(T4013))
def test_git_format_patch_outputs(corpus, tmp_path, variant):
    text = (corpus / "git" / "t4013" / f"diff.format-patch_{variant}").read_text()
    mbox = tmp_path / "series.mbox"
    mbox.write_text(text.split("\n", 1)[1].rsplit("\n$\n", 1)[0] + "\n")  # drop the `$ cmd` and `$` lines
    cover, indexes = T4013[variant]
    series = load_series(str(mbox))
    assert (series.cover.subject if series.cover else None) == cover
    assert [p.index for p in series.patches] == indexes
    assert all(p.files and p.diff.startswith("diff --git ") for p in series.patches)
    assert len(series.other_series) == (2 if "no-numbered" in variant else 0)


def test_git_quoted_crlf_is_unified(corpus):
    patch = load_series(str(corpus / "git" / "t4258" / "mbox")).patches[0]
    assert "\r" not in patch.diff and [f.path for f in patch.files] == ["text"]


def _corpus_files():
    from tests.conftest import CORPUS
    if not CORPUS.is_dir():
        return []
    return sorted(str(p.relative_to(CORPUS)) for p in CORPUS.rglob("*") if p.is_file())


@pytest.mark.parametrize("relative", _corpus_files() or ["(corpus absent)"])
def test_every_corpus_file_reads_cleanly(corpus, relative):
    started = time.monotonic()
    try:
        topics = find_series(str(corpus / relative))
    except BadInput as error:
        assert str(error), "BadInput must say what is wrong"
    else:
        assert all(series.patches for topic in topics for series in topic)
    assert time.monotonic() - started < 10, "reading one corpus file must not hang"
