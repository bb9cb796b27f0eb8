"""The bot's state store: migrations, the all-or-nothing outcome, the outbox; SQLite and a real PostgreSQL."""

from __future__ import annotations

import sqlite3

import pytest

from patchbench.bot.store import MIGRATIONS, PendingCheck, Store
from tests.conftest import missing
from tests.support.postgres import PostgresServer, binaries


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "state.sqlite")
        return
    bin_dir = binaries()
    if bin_dir is None:
        missing("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    with PostgresServer(bin_dir) as server:
        yield server.url


def test_outcome_checks_and_mails_are_recorded_together_and_posted_once(store_url):
    store = Store(store_url)
    assert store.schema_version() == len(MIGRATIONS)
    store.note_series(7, "netdev", "s", 1, "waiting")
    store.note_series(7, "netdev", "s", 1, "ready")
    store.note_series(7, "netdev", "s", 1, "waiting")   # a late series-created event moves nothing back
    assert store.series_with("netdev", "ready") == [(7, pytest.approx(store.series_with("netdev", "ready")[0][1]))]
    checks = [PendingCheck(70, "patchbench-check", "fail", "1 new finding", "http://x/70"),
              PendingCheck(71, "patchbench-check", "success", "none", None)]
    store.record_outcome(7, {"id": 7, "status": "applied"}, checks, [("<m1@x>", "mail text")])
    assert store.series_status(7) == "done" and store.outcome(7) == {"id": 7, "status": "applied"}
    assert store.unposted_checks() == checks
    store.check_posted(70, "patchbench-check", "http://pw/checks/1/")
    assert store.unposted_checks() == checks[1:]
    assert store.unsent_mails() == [("<m1@x>", "mail text")]
    store.mail_sent("<m1@x>")
    assert store.unsent_mails() == []
    # recording the same series again (a forced re-run) neither re-queues a posted check nor a sent mail
    store.record_outcome(7, {"id": 7, "status": "applied"}, checks, [("<m1@x>", "mail text")])
    assert store.unposted_checks() == checks[1:] and store.unsent_mails() == []
    store.set_since("netdev", "series-completed", "2026-12-01T04:00:00")
    store.set_since("netdev", "series-completed", "2026-12-01T05:00:00")
    assert store.since("netdev", "series-completed") == "2026-12-01T05:00:00"
    store.close()
    reopened = Store(store_url)   # migrations are not run twice
    assert reopened.schema_version() == len(MIGRATIONS) and reopened.unposted_checks() == checks[1:]
    reopened.close()


def test_a_failed_transaction_leaves_nothing_behind(store_url):
    store = Store(store_url)
    store.note_series(8, "netdev", "s", 1, "ready")
    bad = [PendingCheck(80, "patchbench-check", "fail", "x", None), None]   # the second row breaks the insert
    with pytest.raises(AttributeError):
        store.record_outcome(8, {"id": 8}, bad, [])
    assert store.unposted_checks() == [] and store.series_status(8) == "ready"
    store.close()


def test_an_older_database_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied REAL)")
    for statement in MIGRATIONS[0]:
        db.execute(statement)
    db.execute("INSERT INTO schema_migrations VALUES (1, 0)")
    db.execute("INSERT INTO checks (patch, context, series, state, description) VALUES (1, 'c', 1, 'fail', 'd')")
    db.commit()
    db.close()
    store = Store(str(path))
    assert store.schema_version() == 2
    assert store.unposted_checks() == [PendingCheck(1, "c", "fail", "d", None)]
    store.post_failed("checks", "patch = ? AND context = ?", (1, "c"))
    assert store._run("SELECT failures FROM checks")[0][0] == 1
    store.close()
