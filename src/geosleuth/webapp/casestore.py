"""The web app's case file: cases, their jobs, notes, tags and results in SQLite in the workdir.

One file, ``cases.sqlite``, beside the job folders: a job's row holds what it was asked (the
upload's original name, its SHA-256 and EXIF, the settings) and what it produced (status, the
trajectory record, the event log), so a restarted server lists the same jobs and serves the
same bookmarks. The schema's version is SQLite's ``user_version``; `MIGRATIONS` brings an older
file up to `SCHEMA_VERSION` in one transaction each, and version 0 (a workdir from before the
store) is migrated by importing the job folders it holds. A workdir is served by one server at a
time: `claim_workdir` takes an exclusive lock a second server cannot get, and says so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

log = logging.getLogger(__name__)

DB_FILE = "cases.sqlite"
LOCK_FILE = ".geosleuth-serve.lock"
SCHEMA_VERSION = 1
JOB_COLUMNS = (
    "id",
    "case_id",
    "image_name",
    "image_file",
    "sha256",
    "size_bytes",
    "exif",
    "mode",
    "prompt_style",
    "samples",
    "settings",
    "created_at",
    "status",
    "error",
    "map_file",
    "trajectory",
    "events",
    "source_job",
)
JSON_COLUMNS = ("exif", "settings", "events", "tags")


class WorkdirInUse(RuntimeError):
    """Another geosleuth server holds this workdir."""


@dataclass
class CaseRow:
    """A case: a named group of jobs with the analyst's notes and tags."""

    id: str
    name: str
    notes: str
    tags: list[str]
    created_at: float
    updated_at: float

    def public(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "notes": self.notes,
            "tags": self.tags,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@contextmanager
def claim_workdir(workdir: Path) -> Iterator[FileLock]:
    """Hold ``workdir`` for this server; `WorkdirInUse` at once when another server holds it."""
    workdir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(workdir / LOCK_FILE), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise WorkdirInUse(
            "another geosleuth server is using this workdir; stop it, "
            "or start this one with another --workdir"
        ) from None
    try:
        yield lock
    finally:
        lock.release()


V1_TABLES = """
        CREATE TABLE cases (
            id TEXT PRIMARY KEY, name TEXT NOT NULL, notes TEXT NOT NULL DEFAULT '',
            tags TEXT NOT NULL DEFAULT '[]', created_at REAL NOT NULL, updated_at REAL NOT NULL);
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY, case_id TEXT NOT NULL REFERENCES cases(id) ON DELETE CASCADE,
            image_name TEXT NOT NULL, image_file TEXT NOT NULL, sha256 TEXT NOT NULL,
            size_bytes INTEGER NOT NULL, exif TEXT NOT NULL DEFAULT '{}', mode TEXT NOT NULL,
            prompt_style TEXT NOT NULL, samples INTEGER NOT NULL, settings TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL, status TEXT NOT NULL, error TEXT, map_file TEXT,
            trajectory TEXT, events TEXT NOT NULL DEFAULT '[]', source_job TEXT);
        CREATE INDEX jobs_case ON jobs(case_id);
        """


def _v1(db: sqlite3.Connection, workdir: Path) -> None:
    """Cases and jobs; the job folders of a workdir from before the store become one imported case."""
    for statement in V1_TABLES.split(";"):
        if statement.strip():
            db.execute(statement)  # executescript would commit the migration half-way
    legacy = sorted(p for p in workdir.iterdir() if p.is_dir() and any(p.glob("input.*")))
    if not legacy:
        return
    now = time.time()
    case_id = "imported"
    db.execute(
        "INSERT INTO cases VALUES (?, ?, ?, '[\"imported\"]', ?, ?)",
        (
            case_id,
            "Jobs from before the case file",
            "Found in the workdir when it was first opened.",
            now,
            now,
        ),
    )
    for folder in legacy:
        image = next(folder.glob("input.*"))
        record = folder / "trajectories.jsonl"
        trajectory = _first_record(record)
        mode = (
            "offline" if trajectory and json.loads(trajectory).get("prompt_style") == "offline" else "model"
        )
        db.execute(
            "INSERT INTO jobs (id, case_id, image_name, image_file, sha256, size_bytes, mode, prompt_style,"
            " samples, created_at, status, error, trajectory) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                folder.name,
                case_id,
                f"{image.name} (original name not recorded)",
                image.name,
                file_sha256(image),
                image.stat().st_size,
                mode,
                "offline" if mode == "offline" else "unknown",
                1,
                folder.stat().st_mtime,
                "done" if trajectory else "failed",
                None if trajectory else "no result was recorded for this job before the case file existed",
                trajectory,
            ),
        )


MAX_RECORD_CHARS = 50_000_000
"""Longest trajectory line read from an old job folder (a record with many tool images' text)."""


def _first_record(path: Path) -> str | None:
    """The first JSON object of a job's ``trajectories.jsonl``; None when absent or unreadable."""
    if not path.is_file():
        return None
    with path.open(encoding="utf-8", errors="replace") as handle:
        line = handle.readline(MAX_RECORD_CHARS)
    try:
        return line if isinstance(json.loads(line), dict) else None
    except ValueError:
        return None


MIGRATIONS: dict[int, Callable[[sqlite3.Connection, Path], None]] = {1: _v1}
"""Version N's migration brings a version N-1 file to N."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class CaseStore:
    """The SQLite case file; every call is one short transaction, safe from any thread."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.path = workdir / DB_FILE
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        self._db.execute("PRAGMA foreign_keys = ON")
        self._db.execute("PRAGMA journal_mode = WAL")
        self._migrate()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{self.path.name} has schema version {version}, newer than this geosleuth's "
                f"{SCHEMA_VERSION}: upgrade geosleuth"
            )
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self._tx() as db:
                MIGRATIONS[target](db, self.workdir)
                db.execute(f"PRAGMA user_version = {target}")
            log.info("case file %s migrated to schema version %d", self.path.name, target)

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    @property
    def version(self) -> int:
        with self._lock:
            return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()

    # -- cases --------------------------------------------------------------------------------

    def add_case(self, case_id: str, name: str, notes: str = "", tags: list[str] | None = None) -> CaseRow:
        now = time.time()
        row = CaseRow(case_id, name, notes, list(tags or []), now, now)
        with self._tx() as db:
            db.execute(
                "INSERT INTO cases VALUES (?, ?, ?, ?, ?, ?)",
                (row.id, row.name, row.notes, json.dumps(row.tags), now, now),
            )
        return row

    def case(self, case_id: str) -> CaseRow | None:
        with self._lock:
            row = self._db.execute("SELECT * FROM cases WHERE id = ?", (case_id,)).fetchone()
        return _case(row) if row else None

    def cases(self) -> list[CaseRow]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM cases ORDER BY created_at DESC").fetchall()
        return [_case(r) for r in rows]

    def update_case(
        self, case_id: str, *, name: str | None, notes: str | None, tags: list[str] | None
    ) -> CaseRow | None:
        with self._tx() as db:
            for column, value in (("name", name), ("notes", notes), ("tags", tags)):
                if value is not None:
                    stored = json.dumps(value) if column == "tags" else value
                    db.execute(f"UPDATE cases SET {column} = ? WHERE id = ?", (stored, case_id))
            db.execute("UPDATE cases SET updated_at = ? WHERE id = ?", (time.time(), case_id))
        return self.case(case_id)

    def delete_case(self, case_id: str) -> list[str]:
        """Remove the case and its jobs' rows; returns the job ids (the caller removes their folders)."""
        with self._tx() as db:
            ids = [r[0] for r in db.execute("SELECT id FROM jobs WHERE case_id = ?", (case_id,))]
            db.execute("DELETE FROM cases WHERE id = ?", (case_id,))
        return ids

    # -- jobs ---------------------------------------------------------------------------------

    def save_job(self, values: dict[str, Any]) -> None:
        """Insert or replace one job's row (``values`` has every `JOB_COLUMNS` key)."""
        row = [json.dumps(values[c]) if c in JSON_COLUMNS else values[c] for c in JOB_COLUMNS]
        marks = ", ".join("?" * len(row))
        with self._tx() as db:
            db.execute(f"INSERT OR REPLACE INTO jobs ({', '.join(JOB_COLUMNS)}) VALUES ({marks})", row)

    def delete_job(self, job_id: str) -> None:
        with self._tx() as db:
            db.execute("DELETE FROM jobs WHERE id = ?", (job_id,))

    def jobs(self) -> list[dict[str, Any]]:
        """Every job's row, oldest first, JSON columns decoded."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM jobs ORDER BY created_at").fetchall()
        return [{k: json.loads(r[k]) if k in JSON_COLUMNS else r[k] for k in r.keys()} for r in rows]  # noqa: SIM118 (a Row iterates its values)


def _case(row: sqlite3.Row) -> CaseRow:
    return CaseRow(
        row["id"], row["name"], row["notes"], json.loads(row["tags"]), row["created_at"], row["updated_at"]
    )
