"""The call index answers the same whatever it was asked before: a lint asks for the ways into the
functions of one file after another in one process, and a file's findings must depend only on that
file and the index (a lint of a subtree once reported a dereference after a section ended that a
lint of the file alone did not, or not in the next run).

A small tree of our own, written here: a chain of callers across files (a caller two files away is
cut short where one asked first-hand is not), and two static functions that call each other."""

from __future__ import annotations

from pathlib import Path

import pytest

from patchbench.checks import callindex

FILES = {
    "Kbuild": "",
    "MAINTAINERS": "",
    # the chain: target() <- mid() <- top() (with a section held) <- nobody
    "drivers/a.c": "void target(void)\n{\n}\n\nvoid leaf(void)\n{\n}\n",
    "drivers/b.c": "void target(void);\n\nvoid mid(void)\n{\n\ttarget();\n}\n",
    "drivers/c.c": ("void mid(void);\n\nvoid top(void)\n{\n\trcu_read_lock();\n\tmid();\n"
                    "\trcu_read_unlock();\n}\n"),
    # leaf() <- via() <- mid(): asking about leaf() reaches mid() two files away
    "drivers/d.c": "void leaf(void);\n\nvoid via(void)\n{\n\tleaf();\n}\n",
    "drivers/e.c": "void via(void);\n\nvoid mid2(void)\n{\n\tvia();\n}\n",
    # recursion: s1() and s2() call each other, s2() from inside a section; each calls a global
    "drivers/f.c": ("void first(void)\n{\n}\n\nvoid second(void)\n{\n}\n"),
    "drivers/g.c": ("void first(void);\nvoid second(void);\nstatic void s1(int n);\n\n"
                    "static void s2(int n)\n{\n\tif (n)\n\t\ts1(n - 1);\n\tsecond();\n}\n\n"
                    "static void s1(int n)\n{\n\tif (n) {\n\t\trcu_read_lock();\n\t\ts2(n - 1);\n"
                    "\t\trcu_read_unlock();\n\t}\n\tfirst();\n}\n\n"
                    "void pub(void)\n{\n\trcu_read_lock();\n\ts1(3);\n\trcu_read_unlock();\n}\n"),
}
# mid() also calls via() in the chain question: mid() is two files from leaf()
FILES["drivers/b.c"] = "void target(void);\nvoid via(void);\n\nvoid mid(void)\n{\n\ttarget();\n\tvia();\n}\n"
QUESTIONS = [("drivers/a.c", "target"), ("drivers/a.c", "leaf"), ("drivers/f.c", "first"),
             ("drivers/f.c", "second")]


@pytest.fixture
def index(tmp_path, monkeypatch) -> callindex.CallIndex:
    monkeypatch.setenv("PATCHBENCH_INDEX_CACHE", str(tmp_path / "index"))
    tree = tmp_path / "linux"
    for path, text in FILES.items():
        (tree / path).parent.mkdir(parents=True, exist_ok=True)
        (tree / path).write_text(text)
    return callindex.from_files(tree, 1)


def _answers(index: callindex.CallIndex, order: list[tuple[str, str]]) -> dict:
    fresh = callindex.CallIndex(index.digest, index.directory)   # nothing asked of it yet
    return {(path, name): sorted((sorted(w.families), w.known) for w in fresh.ways(path, name))
            for path, name in order}


def test_ways_in_do_not_depend_on_what_was_asked_before(index):
    alone = {question: _answers(index, [question])[question] for question in QUESTIONS}
    # what the chain and the recursion give when asked first-hand
    assert alone[("drivers/a.c", "target")] == [(["rcu"], "caller")]
    assert alone[("drivers/f.c", "first")] == [(["rcu"], "caller")]
    assert alone[("drivers/f.c", "second")] == [(["rcu"], "caller")]
    for order in (QUESTIONS, QUESTIONS[::-1], [QUESTIONS[1], QUESTIONS[0], QUESTIONS[3], QUESTIONS[2]]):
        assert _answers(index, order) == alone, order
