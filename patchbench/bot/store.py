"""The bot's state: events seen, series and their outcome, and an outbox of checks and mails.

SQLite by default (a file path), PostgreSQL when given a `postgresql://` URL (psycopg 3). Plain
DB-API: the statements below are written once with `?` placeholders and run on both. The schema
is created and upgraded by numbered migrations recorded in `schema_migrations`; a newer bot opening
an older database runs the missing ones, in order, each in its own transaction.

Crash safety: a series' results and every check and mail they produce are written in one
transaction (`record_outcome`), before anything is posted. Posting then walks the outbox; each row
is marked done only after patchwork (or the SMTP server) accepted it, so a kill loses nothing, and
the post itself is made idempotent by the caller (an existing check with the same context is found
first; a mail already in the maildir is not written again).
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from patchbench.errors import BadInput

MIGRATIONS: list[list[str]] = [
    [  # 1: the first schema
        """CREATE TABLE cursors (
               project TEXT NOT NULL, category TEXT NOT NULL, since TEXT NOT NULL,
               PRIMARY KEY (project, category))""",
        """CREATE TABLE series (
               id INTEGER PRIMARY KEY, project TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
               status TEXT NOT NULL,            -- waiting | ready | done
               first_seen REAL NOT NULL, outcome TEXT)""",
        """CREATE TABLE checks (
               patch INTEGER NOT NULL, context TEXT NOT NULL, series INTEGER NOT NULL,
               state TEXT NOT NULL, description TEXT NOT NULL, target_url TEXT,
               posted INTEGER NOT NULL DEFAULT 0, check_url TEXT,
               PRIMARY KEY (patch, context))""",
        """CREATE TABLE mails (
               message_id TEXT PRIMARY KEY, series INTEGER NOT NULL, body TEXT NOT NULL,
               sent INTEGER NOT NULL DEFAULT 0)""",
    ],
    [  # 2: how often a post failed, so that a check patchwork keeps refusing is visible
        "ALTER TABLE checks ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE mails ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
    ],
]


@dataclass
class PendingCheck:
    patch: int
    context: str
    state: str
    description: str
    target_url: str | None


class Store:
    def __init__(self, url: str):
        self.postgres = url.startswith(("postgresql://", "postgres://"))
        if self.postgres:
            try:
                import psycopg
            except ImportError:
                raise BadInput("a PostgreSQL database needs psycopg: pip install 'psycopg[binary]'") from None
            try:
                self.db = psycopg.connect(url, autocommit=True)
            except psycopg.Error as exc:
                raise BadInput(f"cannot connect to the database: {str(exc).splitlines()[0]}") from None
        else:
            path = Path(url.removeprefix("sqlite:///"))
            path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
            self.db.execute("PRAGMA journal_mode=WAL")
        self.migrate()

    # -- plumbing ---------------------------------------------------------------------------
    def _sql(self, statement: str) -> str:
        return statement.replace("?", "%s") if self.postgres else statement

    def _run(self, statement: str, params: tuple = ()) -> list[tuple]:
        cursor = self.db.cursor()
        cursor.execute(self._sql(statement), params)
        rows = cursor.fetchall() if cursor.description else []
        cursor.close()
        return rows

    def transaction(self):
        return _Transaction(self)

    def migrate(self) -> None:
        with self.transaction():
            self._run("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied REAL)")
            done = {row[0] for row in self._run("SELECT version FROM schema_migrations")}
        for number, statements in enumerate(MIGRATIONS, 1):
            if number in done:
                continue
            with self.transaction():
                for statement in statements:
                    self._run(statement)
                self._run("INSERT INTO schema_migrations VALUES (?, ?)", (number, time.time()))

    def schema_version(self) -> int:
        return self._run("SELECT MAX(version) FROM schema_migrations")[0][0] or 0

    def close(self) -> None:
        self.db.close()

    # -- cursors of the events API ------------------------------------------------------------
    def since(self, project: str, category: str) -> str | None:
        rows = self._run("SELECT since FROM cursors WHERE project = ? AND category = ?", (project, category))
        return rows[0][0] if rows else None

    def set_since(self, project: str, category: str, since: str) -> None:
        with self.transaction():
            self._run("DELETE FROM cursors WHERE project = ? AND category = ?", (project, category))
            self._run("INSERT INTO cursors VALUES (?, ?, ?)", (project, category, since))

    # -- series -----------------------------------------------------------------------------
    def series_status(self, series_id: int) -> str | None:
        rows = self._run("SELECT status FROM series WHERE id = ?", (series_id,))
        return rows[0][0] if rows else None

    def note_series(self, series_id: int, project: str, name: str, version: int, status: str) -> None:
        """Remember a series (waiting for its patches, or ready to run), first seen now; a known
        series only moves on, from waiting to ready."""
        with self.transaction():
            current = self.series_status(series_id)
            if current is None:
                self._run("INSERT INTO series (id, project, name, version, status, first_seen) VALUES (?, ?, ?, ?, ?, ?)",
                          (series_id, project, name, version, status, time.time()))
            elif current == "waiting" and status == "ready":
                self._run("UPDATE series SET status = 'ready' WHERE id = ?", (series_id,))

    def series_with(self, project: str, status: str) -> list[tuple[int, float]]:
        return [(row[0], row[1]) for row in
                self._run("SELECT id, first_seen FROM series WHERE project = ? AND status = ? ORDER BY id",
                          (project, status))]

    def outcome(self, series_id: int) -> dict | None:
        rows = self._run("SELECT outcome FROM series WHERE id = ?", (series_id,))
        return json.loads(rows[0][0]) if rows and rows[0][0] else None

    def record_outcome(self, series_id: int, outcome: dict, checks: list[PendingCheck],
                       mails: list[tuple[str, str]]) -> None:
        """The series is done: its outcome, checks to post and mails to send, all or nothing."""
        with self.transaction():
            for check in checks:
                if self._run("SELECT 1 FROM checks WHERE patch = ? AND context = ?", (check.patch, check.context)):
                    continue  # recorded by an earlier run of this series (a forced re-run): never twice
                self._run("INSERT INTO checks (patch, context, series, state, description, target_url) "
                          "VALUES (?, ?, ?, ?, ?, ?)",
                          (check.patch, check.context, series_id, check.state, check.description, check.target_url))
            for message_id, text in mails:
                if not self._run("SELECT 1 FROM mails WHERE message_id = ?", (message_id,)):
                    self._run("INSERT INTO mails (message_id, series, body) VALUES (?, ?, ?)",
                              (message_id, series_id, text))
            self._run("UPDATE series SET status = 'done', outcome = ? WHERE id = ?",
                      (json.dumps(outcome, sort_keys=True), series_id))

    # -- outbox -----------------------------------------------------------------------------
    def unposted_checks(self) -> list[PendingCheck]:
        return [PendingCheck(*row) for row in self._run(
            "SELECT patch, context, state, description, target_url FROM checks WHERE posted = 0 ORDER BY patch, context")]

    def check_posted(self, patch: int, context: str, check_url: str | None) -> None:
        with self.transaction():
            self._run("UPDATE checks SET posted = 1, check_url = ? WHERE patch = ? AND context = ?",
                      (check_url, patch, context))

    def post_failed(self, table: str, key_sql: str, key: tuple) -> None:
        with self.transaction():
            self._run(f"UPDATE {table} SET failures = failures + 1 WHERE {key_sql}", key)

    def unsent_mails(self) -> list[tuple[str, str]]:
        return [(row[0], row[1]) for row in
                self._run("SELECT message_id, body FROM mails WHERE sent = 0 ORDER BY message_id")]

    def mail_sent(self, message_id: str) -> None:
        with self.transaction():
            self._run("UPDATE mails SET sent = 1 WHERE message_id = ?", (message_id,))


class _Transaction:
    """BEGIN … COMMIT, or ROLLBACK on an exception; one level (the store never nests them)."""

    def __init__(self, store: Store):
        self.store = store

    def __enter__(self):
        if self.store.postgres:
            self.context = self.store.db.transaction()
            self.context.__enter__()
        else:
            self.store.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, value, traceback):
        if self.store.postgres:
            return self.context.__exit__(kind, value, traceback)
        self.store.db.execute("ROLLBACK" if kind else "COMMIT")
        return False
