"""The lock rules judge what functions do, never what they are called (issue 25): every lock fixture
gives the same findings with its functions renamed to neutral names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from patchbench.checks.run import checkfile
from patchbench.checks.engine.model import FileModel

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checks"
RULES = {"ptr-ring-consume-unlocked", "ptr-ring-produce-unlocked", "lock-imbalance"}
FIXTURE_FILES = sorted([*FIXTURES.glob("lock/*.c"), *FIXTURES.glob("ptr_ring/*.c")])


def renamed(source: bytes, names: dict[str, str] | None = None) -> bytes:
    """source with each function it defines renamed (whole words: calls, registrations, comments
    too), by default to f_aa, f_ab, ...; struct fields (`.start =`) keep their names."""
    if names is None:
        defined = FileModel.build("x.c", source).functions
        names = {name: f"f_{chr(97 + i // 26)}{chr(97 + i % 26)}" for i, name in enumerate(sorted(defined))}
    pattern = re.compile(rb"(?<![\w.>])(" + b"|".join(re.escape(n.encode()) for n in names) + rb")\b")
    return pattern.sub(lambda m: names[m.group(1).decode()].encode(), source)


def verdicts(path: str, source: bytes) -> set[tuple[str, int, str]]:
    return {(f.rule, f.line, f.severity) for f in checkfile.check_source(path, source, RULES)}


@pytest.mark.parametrize("fixture", FIXTURE_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_renamed_functions_give_the_same_findings(fixture: Path, tmp_path: Path):
    source = fixture.read_bytes()
    copy = tmp_path / fixture.name
    copy.write_bytes(renamed(source))
    assert verdicts(str(copy), copy.read_bytes()) == verdicts(str(fixture), source)


LEAK_ON_ERROR = b"""struct foo { struct mutex lock; int state; int x; };

static int NAME(struct foo *d)
{
	mutex_lock(&d->lock);
	if (d->state)
		return -EBUSY;
	d->x = 1;
	mutex_unlock(&d->lock);
	return 0;
}
"""


@pytest.mark.parametrize("name", ["foo_run", "foo_start", "foo_hold", "foo_lock", "foo_get", "foo_trylock"])
def test_a_lock_leaked_on_an_error_path_is_reported_whatever_the_name(name: str):
    source = LEAK_ON_ERROR.replace(b"NAME", name.encode())
    assert verdicts("leak.c", source) == {("lock-imbalance", 7, "error")}


TRYLOCK = b"""struct foo { struct mutex lock; int state; };

/* held where it returns 0, released (or never taken) where it fails */
static int NAME(struct foo *d)
{
	if (!mutex_trylock(&d->lock))
		return -EBUSY;
	if (d->state) {
		mutex_unlock(&d->lock);
		return -ENODEV;
	}
	return 0;
}
"""


@pytest.mark.parametrize("name", ["foo_run", "foo_trylock"])
def test_a_conditional_acquire_is_no_leak_whatever_the_name(name: str):
    assert verdicts("try.c", TRYLOCK.replace(b"NAME", name.encode())) == set()


QUERY_TWICE = b"""struct foo { spinlock_t lock; struct net_device *netdev; int x; };

static void foo_set(struct foo *d)
{
	if (CALL(d->netdev))
		spin_lock(&d->lock);
	d->x = 1;
	if (CALL(d->netdev))
		spin_unlock(&d->lock);
}
"""


@pytest.mark.parametrize("call, found", [("foo_is_up", set()), ("foo_has_carrier", set()),
                                         ("foo_xdp_supported", set()),
                                         ("foo_isolate", {("lock-imbalance", 10, "error")})])
def test_a_query_named_by_the_facts_table_answers_the_same_twice(call: str, found: set):
    """[flow] query_words: a query of a header (no body seen) repeated in two conditions is one
    outcome; any other call may answer differently the second time."""
    assert verdicts("query.c", QUERY_TWICE.replace(b"CALL", call.encode())) == found


LEAK_POINTER = b"""struct foo { struct mutex lock; int state; };

static struct foo *NAME(struct foo *d)
{
	mutex_lock(&d->lock);
	if (d->state)
		return ERR_PTR(-EBUSY);
	mutex_unlock(&d->lock);
	return d;
}
"""


@pytest.mark.parametrize("name", ["foo_find", "foo_get_locked"])
def test_a_lookup_keeping_the_lock_where_it_fails_is_reported_whatever_the_name(name: str):
    assert verdicts("leak.c", LEAK_POINTER.replace(b"NAME", name.encode())) == {("lock-imbalance", 7, "error")}
