"""Statements compiled once and run straight on the DBAPI cursor: the send's hot path."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Connection
from sqlalchemy.engine import CursorResult


class _Prepared:
    """A statement compiled once per dialect and run straight on the DBAPI cursor.

    The two statements of every message cost ~5 us this way instead of ~45 us
    through ``Connection.execute``, and several times that between two SMTP
    transactions (cold caches). Types still apply: each value goes through its
    column type's bind processor (UTCDateTime included), as SQLAlchemy would.
    Changes made this way must be committed with ``raw_commit``.
    """

    def __init__(self, statement: Any) -> None:
        self.statement = statement
        self._by_dialect: dict[str, tuple[str, list[str] | None, dict[str, Any],
                                          dict[str, Any]]] = {}

    def _prepare(self, dialect: Any) -> tuple[str, list[str] | None, dict[str, Any],
                                              dict[str, Any]]:
        compiled = self.statement.compile(dialect=dialect)
        ours = [name for name in compiled.binds if name.startswith("b_")]
        fixed = compiled.construct_params({name: None for name in ours})
        processors: dict[str, Any] = {}
        for name in fixed:
            processor = compiled.binds[name].type.bind_processor(dialect)
            if processor is None:
                continue
            if name in ours:
                processors[name] = processor
            elif fixed[name] is not None:
                fixed[name] = processor(fixed[name])
        order = list(compiled.positiontup) if compiled.positional else None
        prepared = (compiled.string, order, fixed, processors)
        self._by_dialect[dialect.name] = prepared
        return prepared

    def run(self, conn: Connection, values: dict[str, Any]) -> int:
        sql, order, fixed, processors = (self._by_dialect.get(conn.dialect.name)
                                         or self._prepare(conn.dialect))
        params = dict(fixed)
        for name, value in values.items():
            processor = processors.get(name)
            params[name] = processor(value) if processor and value is not None else value
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.execute(sql, [params[n] for n in order] if order is not None else params)
            return int(cursor.rowcount)
        finally:
            cursor.close()


def raw_commit(conn: Connection) -> None:
    """Commit what ``_Prepared`` statements changed (they bypass the Connection)."""
    conn.connection.dbapi_connection.commit()  # type: ignore[union-attr]


def rowcount(result: Any) -> int:
    """Rows an UPDATE or INSERT changed (typed: ``Result`` does not declare it)."""
    return int(cast(CursorResult[Any], result).rowcount)
