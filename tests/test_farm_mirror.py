"""What a farm task carries and brings back, without a broker: a worker's own copy of the submitter's
commits (dispatch/mirror.py), with small real repositories (a bare "tree" served by file URL, a
submitter's clone with a series on top, a worker cache that has neither), and a result's log."""

from __future__ import annotations

import json
import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from patchbench.dispatch import mirror, wire
from tests.support.git_series import commit_files, git


@pytest.fixture
def tree_and_series(tmp_path):
    """(the tree's file URL, the submitter's repository, the base, the series' two commits)."""
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q")
    first = commit_files(upstream, None, {"net/a.c": b"int a;\n"}, "a")
    base = commit_files(upstream, first, {"net/b.c": b"int b;\n"}, "b")
    git(upstream, "update-ref", "refs/heads/main", base)
    served = tmp_path / "served.git"
    git(tmp_path, "clone", "-q", "--bare", str(upstream), str(served))
    submitter = tmp_path / "submitter"
    git(tmp_path, "clone", "-q", str(served), str(submitter))
    one = commit_files(submitter, base, {"net/a.c": b"int a = 1;\n"}, "net: a is one")
    two = commit_files(submitter, one, {"net/b.c": b"int b = 2;\n"}, "net: b is two")
    return served.as_uri(), submitter, base, [one, two]


def test_a_worker_with_an_empty_cache_gets_the_base_and_the_series_and_checks_their_trees(tree_and_series,
                                                                                           tmp_path):
    url, submitter, base, series = tree_and_series
    refs = git(submitter, "for-each-ref")
    source = wire.source_from_dict(wire.source_to_dict(mirror.source_for(submitter, url, {base}, set(series))))
    assert source.bases == (base,) and source.bundle.startswith(b"# v2 git bundle")
    repo = mirror.checkout_repo(source, tmp_path / "worker")
    assert repo.is_relative_to(tmp_path / "worker") and (repo / "shallow").is_file()   # the base alone, no history
    for commit in series:
        assert git(repo, "rev-parse", f"{commit}^{{tree}}") == git(submitter, "rev-parse", f"{commit}^{{tree}}")
    assert git(repo, "show", f"{series[1]}:net/b.c") == "int b = 2;"
    assert git(submitter, "for-each-ref") == refs   # no ref was made in the submitter's repository for the bundle
    assert mirror.checkout_repo(source, tmp_path / "worker") == repo   # warm: nothing fetched again


def test_a_commit_with_another_tree_than_the_submitter_applied_is_refused(tree_and_series, tmp_path):
    url, submitter, base, series = tree_and_series
    source = mirror.source_for(submitter, url, {base}, set(series))
    forged = replace(source, trees=tuple((c, "0" * 40 if c == series[1] else t) for c, t in source.trees))
    with pytest.raises(mirror.FetchFailed, match=f"commit {series[1][:12]} has tree .* the submitter applied tree 000"):
        mirror.checkout_repo(forged, tmp_path / "worker")


def test_a_tree_the_worker_cannot_fetch_is_one_clear_failure(tree_and_series, tmp_path):
    url, submitter, base, series = tree_and_series
    source = replace(mirror.source_for(submitter, url, {base}, set(series)), url=(tmp_path / "gone.git").as_uri())
    with pytest.raises(mirror.FetchFailed, match=f"cannot fetch {base[:12]} from file://.*gone.git: "):
        mirror.checkout_repo(source, tmp_path / "worker")


def test_a_server_that_never_answers_is_given_up_at_the_fetch_timeout(tree_and_series, tmp_path, monkeypatch):
    url, submitter, base, series = tree_and_series
    with socket.socket() as silent:   # accepts connections (the kernel's backlog), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        source = replace(mirror.source_for(submitter, url, {base}, set(series)), url=f"git://127.0.0.1:{port}/linux")
        monkeypatch.setattr(mirror, "FETCH_TIMEOUT", 2.0)
        started = time.monotonic()
        with pytest.raises(mirror.FetchFailed, match="timed out after 2 s"):
            mirror.checkout_repo(source, tmp_path / "worker")
    assert time.monotonic() - started < 10


def test_a_path_is_used_in_place_and_one_the_worker_cannot_see_says_what_to_do(tree_and_series, tmp_path):
    url, submitter, base, series = tree_and_series
    assert mirror.tree_url(submitter, None) == str(submitter.resolve())
    git(submitter, "config", "patchbench.tree-url", url)
    assert mirror.tree_url(submitter, None) == url and mirror.tree_url(submitter, "git://x/y") == "git://x/y"
    here = mirror.source_for(submitter, str(submitter), {base}, set(series))
    assert here.bundle == b"" and mirror.checkout_repo(here, tmp_path / "worker") == submitter
    elsewhere = replace(here, url=str(tmp_path / "not-on-this-worker"))
    with pytest.raises(mirror.FetchFailed, match="not a git repository on this worker .* --tree-url"):
        mirror.checkout_repo(elsewhere, tmp_path / "worker")


def test_a_result_brings_its_log_back_and_a_long_one_its_end(tmp_path, monkeypatch):
    from patchbench.dispatch.jobs import JobResult

    worker_log = tmp_path / "worker" / "logs" / "farm" / "console-0123456789ab.log"
    worker_log.parent.mkdir(parents=True)
    worker_log.write_bytes(b"".join(b"[%8.3f] line %d\n" % (n / 1000, n) for n in range(20000)))
    result = JobResult("boot", 1, "0123456789ab" * 3, "fail", 3.0, log=str(worker_log), worker="w1@far",
                       fingerprint="BUG:skb_under_panic")
    data = json.loads(json.dumps(wire.result_to_dict(result, with_log=True)))
    back = wire.result_from_dict(data, tmp_path / "submitter-logs")
    assert back.log == str(tmp_path / "submitter-logs" / "w1@far" / "console-0123456789ab.log")
    assert Path(back.log).read_bytes() == worker_log.read_bytes()
    assert (back.status, back.fingerprint, back.worker) == ("fail", "BUG:skb_under_panic", "w1@far")

    monkeypatch.setattr(wire, "LOG_LIMIT", 1000)
    data = json.loads(json.dumps(wire.result_to_dict(result, with_log=True)))
    assert Path(wire.result_from_dict(data, tmp_path / "again").log).read_bytes() == worker_log.read_bytes()[-1000:]
