"""Job results kept in SQLite (``<cache>/results.sqlite`` by default), one row per job run."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from patchbench.dispatch.jobs import JobResult
from patchbench.errors import BadInput

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY,
    run TEXT NOT NULL,             -- one id per patchbench invocation
    finished REAL NOT NULL,        -- unix time
    repo TEXT NOT NULL,
    kind TEXT NOT NULL,
    patch INTEGER,
    commit_sha TEXT NOT NULL,
    status TEXT NOT NULL,
    fingerprint TEXT,
    seconds REAL NOT NULL,
    data TEXT NOT NULL             -- the job's JSON, as reported
);
CREATE INDEX IF NOT EXISTS results_fingerprint ON results(fingerprint);
"""
# Added later; applied in order to a database that lacks them. A job's id (wire.job_id) makes a result
# that arrives twice (a farm job re-run after its worker died) one row.
MIGRATIONS = (
    ("job_id", "ALTER TABLE results ADD COLUMN job_id TEXT;"
               "CREATE UNIQUE INDEX IF NOT EXISTS results_job ON results(run, job_id);"),
    ("worker", "ALTER TABLE results ADD COLUMN worker TEXT;"),
)


@dataclass
class StoredResult:
    id: int
    run: str
    finished: float
    repo: str
    data: dict


class ResultStore:
    """Results database at `path`: created when missing (where job results are to be added), or with
    `read_only` an existing one only. Anything else at `path` is BadInput, never a traceback."""

    def __init__(self, path: Path, read_only: bool = False):
        self.path = path
        if read_only or path.exists():
            check_results_db(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.db = sqlite3.connect(path.resolve().as_uri() + ("?mode=ro" if read_only else ""), uri=True,
                                      timeout=30)
            if not read_only:
                self.db.executescript(SCHEMA)
                columns = {row[1] for row in self.db.execute("PRAGMA table_info(results)")}
                for column, script in MIGRATIONS:
                    if column not in columns:
                        self.db.executescript(script)
        except sqlite3.Error as exc:
            raise BadInput(f"{path}: cannot open the results database: {exc}") from None

    def add(self, run: str, repo: Path, result: JobResult, job_id: str | None = None) -> bool:
        """Store a result; False when this run already has the job's result (it is kept as it was)."""
        with self.db:
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO results (run, finished, repo, kind, patch, commit_sha, status, fingerprint,"
                " seconds, data, job_id, worker) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run, time.time(), str(repo), result.kind, result.patch, result.commit, result.status,
                 result.fingerprint, result.seconds, json.dumps(result.to_json()), job_id, result.worker))
        return cursor.rowcount == 1

    def seen_before(self, fingerprint: str, run: str) -> list[StoredResult]:
        """Earlier runs' results with the same crash fingerprint: the same crash recognised again."""
        return self.query("fingerprint = ? AND run != ?", (fingerprint, run))

    def recent(self, limit: int = 50, commit: str | None = None, status: str | None = None) -> list[StoredResult]:
        clauses, params = ["1"], []
        if commit:
            clauses.append("commit_sha LIKE ?")
            params.append(commit + "%")
        if status:
            clauses.append("status = ?")
            params.append(status)
        return self.query(" AND ".join(clauses), tuple(params), limit)

    def query(self, where: str, params: tuple, limit: int = 1000) -> list[StoredResult]:
        rows = self.db.execute(f"SELECT id, run, finished, repo, data FROM results WHERE {where}"
                               " ORDER BY id DESC LIMIT ?", (*params, limit))
        return [StoredResult(i, run, finished, repo, json.loads(data)) for i, run, finished, repo, data in rows]

    def close(self) -> None:
        self.db.close()


def check_results_db(path: Path) -> None:
    """BadInput unless `path` is a results database this program wrote (read, nothing created)."""
    if not path.exists():
        raise BadInput(f"{path}: no such results database")
    if not path.is_file():
        raise BadInput(f"{path}: not a results database (not a regular file)")
    try:
        with open(path, "rb") as head:
            magic = head.read(16)
    except OSError as exc:
        raise BadInput(f"{path}: cannot read: {exc.strerror}") from None
    if magic != b"SQLite format 3\0":
        raise BadInput(f"{path}: not a results database (not an SQLite file)")
    try:
        db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        try:
            db.execute("SELECT id, run, finished, repo, data FROM results LIMIT 1").fetchall()
        finally:
            db.close()
    except sqlite3.Error as exc:
        raise BadInput(f"{path}: not a patchbench results database ({exc})") from None
