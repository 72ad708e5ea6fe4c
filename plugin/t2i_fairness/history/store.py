"""The run history: a SQLite file every gate run appends to (stdlib ``sqlite3``, no server).

A run's row is written when its first gate is known, with status ``running``, its gates as they
arrive, and the end (verdict, exit status, adjusted p-values) when the session finishes; a run
killed on the way keeps ``running`` and the gates it had, and :meth:`HistoryStore.runs` says
``killed`` once its process is gone. WAL journaling, a busy timeout and one ``BEGIN IMMEDIATE``
transaction per write let concurrent runs share one file (not on a network file system: SQLite's
locks need a local one). The schema carries its version in ``schema_version`` and migrates on open.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import socket
import sqlite3
import time
import zlib
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

__all__ = ["HISTORY_FILE", "SCHEMA_VERSION", "GateRow", "HistoryError", "HistoryStore", "RunRow", "pack_units",
           "unpack_units"]

HISTORY_FILE = "t2i-history.sqlite"
BUSY_TIMEOUT_S = 60.0

# Each entry takes the store from the version before it to its own; a new version appends one, never edits one.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (1, (
        """CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started TEXT NOT NULL, finished TEXT,
           status TEXT NOT NULL, verdict TEXT, exit_status INTEGER, model TEXT, model_identity TEXT,
           scorers TEXT, scorers_identity TEXT, seed INTEGER, settings TEXT, thresholds TEXT,
           thresholds_commit TEXT, selection TEXT, alpha REAL)""",
        """CREATE TABLE gates (run_id INTEGER NOT NULL REFERENCES runs(id), gate TEXT NOT NULL, family TEXT,
           value REAL, low REAL, high REAL, se REAL, confidence REAL, n INTEGER, bound REAL, direction TEXT,
           verdict TEXT, p_value REAL, p_adjusted REAL, power REAL, sample TEXT, record TEXT,
           PRIMARY KEY (run_id, gate))""",
    )),
    (2, (  # who wrote a run (so a killed one is told from one still running) and the lookup by gate
        "ALTER TABLE runs ADD COLUMN host TEXT",
        "ALTER TABLE runs ADD COLUMN pid INTEGER",
        "CREATE INDEX gates_by_gate ON gates (gate, run_id)",
    )),
    (3, (  # the units a gate's value is the mean of (pack_units), for the paired interval between two runs
        "ALTER TABLE gates ADD COLUMN units BLOB",
    )),
)
SCHEMA_VERSION = MIGRATIONS[-1][0]


class HistoryError(Exception):
    """The history store cannot be opened or read (the message names the file)."""


@dataclass(frozen=True)
class RunRow:
    """One run as stored; ``state`` is its status, with ``killed`` for a ``running`` run whose process is gone."""

    id: int
    started: str
    finished: str | None
    status: str
    state: str
    verdict: str | None
    exit_status: int | None
    model: str | None
    model_identity: str | None
    scorers: str | None
    scorers_identity: str | None
    seed: int | None
    settings: dict
    thresholds: str | None
    thresholds_commit: str | None
    selection: str | None
    alpha: float | None

    @property
    def label(self) -> str:
        return f"#{self.id} {self.model} ({self.started[:16].replace('T', ' ')}, {self.state})"


@dataclass(frozen=True)
class GateRow:
    """One gate of one run as stored."""

    run_id: int
    gate: str
    family: str | None
    value: float
    low: float | None
    high: float | None
    se: float | None
    confidence: float | None
    n: int | None
    bound: float | None
    direction: str | None
    verdict: str | None
    p_value: float | None
    p_adjusted: float | None
    power: float | None
    sample: str | None
    units: bytes | None = None  # pack_units' blob; unpack_units reads it

    def unit_values(self) -> dict[str, float] | None:
        """The gate's unit values by unit id, or None."""
        return unpack_units(self.units)


def pack_units(units: Mapping[str, Any] | None) -> bytes | None:
    """A record's ``units`` (``{"ids", "values"}``) as a compact blob (zlib of JSON), or None when it has none.

    Example:
        >>> unpack_units(pack_units({"ids": ["p0", "p1"], "values": [0.25, 1.0]}))
        {'p0': 0.25, 'p1': 1.0}
    """
    if not isinstance(units, Mapping):
        return None
    ids, values = list(units.get("ids") or ()), [_num(v) for v in units.get("values") or ()]
    if not values or len(ids) != len(values) or None in values or len(set(map(str, ids))) != len(ids):
        return None
    return zlib.compress(json.dumps([[str(i) for i in ids], values], separators=(",", ":")).encode(), 9)


def unpack_units(blob: bytes | None) -> dict[str, float] | None:
    if not blob:
        return None
    try:
        ids, values = json.loads(zlib.decompress(blob))
    except (zlib.error, ValueError, TypeError):
        return None
    return dict(zip(ids, map(float, values)))


def now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def _num(x: Any) -> float | None:
    """A finite float, or None (SQLite has no NaN: it would read back as NULL anyway)."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _z(confidence: float) -> float:
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def standard_error(record: Mapping[str, Any]) -> float | None:
    """A gate record's standard error: its uncertainty's ``se``, else the normal one from its interval's width.

    Example:
        >>> round(standard_error({"interval": [0.4, 0.6], "uncertainty": {"confidence": 0.95}}), 4)
        0.051
    """
    unc = record.get("uncertainty") or {}
    se = _num(unc.get("se"))
    if se is not None:
        return se
    iv = record.get("interval")
    conf = _num(unc.get("confidence")) or 0.95
    if iv and len(iv) == 2 and _num(iv[0]) is not None and _num(iv[1]) is not None:
        return (float(iv[1]) - float(iv[0])) / (2 * _z(conf))
    return None


def gate_values(record: Mapping[str, Any], sample: str | None) -> dict[str, Any]:
    """The stored columns of one gate record (a :class:`~t2i_fairness.gating.session.GateRecord`'s dict)."""
    from t2i_fairness.gating.session import record_json

    iv = record.get("interval") or (None, None)
    power = record.get("power") or {}
    unc = record.get("uncertainty") or {}
    return {"gate": record["gate"], "family": record.get("family"), "value": _num(record.get("value")),
            "low": _num(iv[0]), "high": _num(iv[1]), "se": standard_error(record),
            "confidence": _num(unc.get("confidence")), "n": record.get("n"), "bound": _num(record.get("bound")),
            "direction": record.get("direction"), "verdict": record.get("status"), "p_value": _num(record.get("p_value")),
            "p_adjusted": _num(record.get("p_adjusted")), "power": _num(power.get("power")) if isinstance(power, Mapping) else None,
            "sample": sample, "units": pack_units(record.get("units")),
            "record": record_json({k: v for k, v in record.items() if k != "units"})}


def _alive(host: str | None, pid: int | None) -> bool:
    """Whether the process that wrote a run may still run (another host: assumed so)."""
    if not pid or host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it exists
        return True
    return True


class HistoryStore:
    """One history file. Every write is one short transaction, retried while another process holds the lock.

    Example:
        >>> import tempfile, pathlib
        >>> store = HistoryStore(pathlib.Path(tempfile.mkdtemp()) / "h.sqlite")
        >>> run = store.begin_run({"model": "tiny", "seed": 0, "settings": {}})
        >>> store.add_gates(run, [({"gate": "g", "value": 0.5, "n": 10, "status": "pass"}, "s")])
        >>> store.finish_run(run, "finished", verdict="PASSED", exit_status=0)
        >>> [(r.id, r.state) for r in store.runs()], store.gates(run)[0].value
        ([(1, 'finished')], 0.5)
    """

    def __init__(self, path: str | os.PathLike, *, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise HistoryError(f"{self.path}: no history store here (a gate run writes one; --t2i-history moves it)")
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_S, isolation_level=None)
            self.db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise HistoryError(f"{self.path}: not a readable history store ({exc})") from None

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One ``BEGIN IMMEDIATE`` transaction (the write lock taken up front: no deadlock between two writers)."""
        for attempt in range(50):
            try:
                self.db.execute("BEGIN IMMEDIATE")
                break
            except sqlite3.OperationalError as exc:  # busy beyond the timeout: wait, then try again
                if "locked" not in str(exc) and "busy" not in str(exc) or attempt == 49:
                    raise
                time.sleep(0.05 * (attempt + 1))
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def version(self) -> int:
        has = self.db.execute("SELECT name FROM sqlite_master WHERE type='table' AND name='schema_version'").fetchone()
        if not has:
            return 0
        row = self.db.execute("SELECT MAX(version) FROM schema_version").fetchone()
        return int(row[0] or 0)

    def _migrate(self) -> None:
        if self.version() == SCHEMA_VERSION:
            return
        with self._write() as db:
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY, applied TEXT NOT NULL)")
            have = self.version()
            if have > SCHEMA_VERSION:
                raise HistoryError(f"{self.path}: schema version {have} is newer than this t2i-fairness reads "
                                   f"({SCHEMA_VERSION}); upgrade t2i-fairness to read it")
            for version, statements in MIGRATIONS:
                if version > have:
                    for sql in statements:
                        db.execute(sql)
                    db.execute("INSERT INTO schema_version VALUES (?, ?)", (version, now()))

    # -- writing ----------------------------------------------------------------------------------------

    def begin_run(self, meta: Mapping[str, Any]) -> int:
        """A new run with status ``running``; ``meta``: model, model_identity, scorers, scorers_identity, seed,
        settings (a dict), thresholds, thresholds_commit, selection, alpha. Returns its id."""
        cols = ("model", "model_identity", "scorers", "scorers_identity", "seed", "thresholds", "thresholds_commit",
                "selection", "alpha")
        values = [meta.get(c) for c in cols] + [json.dumps(meta.get("settings") or {}, sort_keys=True, default=str)]
        with self._write() as db:
            cur = db.execute(f"INSERT INTO runs (started, status, host, pid, {', '.join(cols)}, settings) "
                             f"VALUES (?, 'running', ?, ?, {', '.join('?' * len(cols))}, ?)",
                             [meta.get("started") or now(), socket.gethostname(), os.getpid(), *values])
            return int(cur.lastrowid)

    def add_gates(self, run_id: int, records: Iterable[tuple[Mapping[str, Any], str | None]]) -> None:
        """Add (or replace) gates of a run: ``(record dict, sample key)`` pairs, in one transaction."""
        rows = [gate_values(r, sample) for r, sample in records]
        if not rows:
            return
        cols = list(rows[0])
        with self._write() as db:
            db.executemany(f"INSERT OR REPLACE INTO gates (run_id, {', '.join(cols)}) VALUES "
                           f"(?, {', '.join('?' * len(cols))})", [[run_id, *(r[c] for c in cols)] for r in rows])

    def finish_run(self, run_id: int, status: str, *, verdict: str | None = None, exit_status: int | None = None,
                   selection: str | None = None) -> None:
        """The run's end: ``finished`` or ``interrupted`` (or ``failed``), its verdict and exit status."""
        with self._write() as db:
            db.execute("UPDATE runs SET status = ?, finished = ?, verdict = ?, exit_status = ?, "
                       "selection = COALESCE(?, selection) WHERE id = ?",
                       (status, now(), verdict, exit_status, selection, run_id))

    # -- reading ----------------------------------------------------------------------------------------

    def runs(self) -> list[RunRow]:
        """Every run, oldest first."""
        rows = self.db.execute("SELECT id, started, finished, status, verdict, exit_status, model, model_identity, "
                               "scorers, scorers_identity, seed, settings, thresholds, thresholds_commit, selection, "
                               "alpha, host, pid FROM runs ORDER BY id").fetchall()
        out = []
        for r in rows:
            state = r[3]
            if state == "running" and not _alive(r[16], r[17]):
                state = "killed"
            try:
                settings = json.loads(r[11] or "{}")
            except ValueError:
                settings = {}
            out.append(RunRow(r[0], r[1], r[2], r[3], state, r[4], r[5], r[6], r[7], r[8], r[9], r[10], settings,
                              r[12], r[13], r[14], r[15]))
        return out

    def gates(self, run_id: int) -> list[GateRow]:
        rows = self.db.execute(f"SELECT {', '.join(_GATE_COLS)} FROM gates WHERE run_id = ? ORDER BY gate",
                               (run_id,)).fetchall()
        return [GateRow(*r) for r in rows]

    def series(self, gate: str, before: int | None = None, limit: int = 20) -> list[GateRow]:
        """One gate's earlier values, oldest first (at most ``limit``; runs before ``before`` when given)."""
        where, args = "gate = ?", [gate]
        if before is not None:
            where, args = where + " AND run_id < ?", args + [before]
        rows = self.db.execute(f"SELECT {', '.join(_GATE_COLS)} FROM gates WHERE {where} ORDER BY run_id DESC "
                               f"LIMIT ?", (*args, limit)).fetchall()
        return [GateRow(*r) for r in reversed(rows)]

    def record(self, run_id: int, gate: str) -> dict | None:
        """The full gate record as the run wrote it (JSON), or None."""
        row = self.db.execute("SELECT record FROM gates WHERE run_id = ? AND gate = ?", (run_id, gate)).fetchone()
        if not row or not row[0]:
            return None
        from t2i_fairness.gating.session import record_from_json

        return record_from_json(row[0])


_GATE_COLS = ("run_id", "gate", "family", "value", "low", "high", "se", "confidence", "n", "bound", "direction",
              "verdict", "p_value", "p_adjusted", "power", "sample", "units")
