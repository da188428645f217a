"""The SQL of every store operation on one key/value table, for SQLite and PostgreSQL.
Specification: stores/sql.md, section "Key layout / schema".

Every statement that selects by key uses the primary-key index: equality, ``IN`` lists of
at most :data:`BATCH` keys, and range predicates ``k >= :low AND k < :high`` (never
``LIKE``, which is case-insensitive in SQLite and treats ``_`` as a wildcard). Key order
is code-point order: SQLite's BINARY collation compares UTF-8 bytes, PostgreSQL's ``"C"``
collation does the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ..byteranges import ByteRequest, OffsetRequest, RangeRequest, SuffixRequest
from ...errors import StoreError, ValueTypeError

#: keys per ``IN (...)`` list and rows per multi-row INSERT
BATCH = 500
#: byte ranges of one value cut by one statement (one result column each)
MAX_RANGES = 64
#: the largest integer ``substr`` (SQLite) and ``substring`` (PostgreSQL) take: SQLite
#: reads its arguments as 32-bit ints, so 2**32 + 1 would become 1 and read the first
#: bytes (https://sqlite.org/lang_corefunc.html#substr; the engine's ``substrFunc`` calls
#: ``sqlite3_value_int``), and PostgreSQL's take ``integer``. No value either database
#: holds is longer (SQLite's hard limit on a BLOB is 2**31 - 1 bytes, PostgreSQL's bytea
#: 1 GiB), so a range starting at or past it is empty and a longer length changes nothing.
SQL_INT_MAX = (1 << 31) - 1


class Queries:
    """SQL text for ``table`` in the dialect of ``backend_name``, and the statements that
    need more than one execute."""

    def __init__(self, backend_name: str, placeholder: str, table: str,
                 segments: str | None = None) -> None:
        """``segments``: the table of appended values' segments (schema version 3), or
        None for a layout without appends (the legacy ones)."""
        self.pg = backend_name == "postgresql"
        t = f'"{table}"'
        self.table = table
        self._ph = placeholder

        def q(sql: str) -> str:
            return sql.replace("?", placeholder)

        length = "octet_length" if self.pg else "length"
        self.get = q(f"SELECT v FROM {t} WHERE k = ?")
        self.exists = q(f"SELECT 1 FROM {t} WHERE k = ?")
        #: the length of the value in the key's row (0 for an appended value)
        self.length = q(f"SELECT {length}(v) FROM {t} WHERE k = ?")
        #: the size of a value, and on SQLite its storage class (``typeof``: a TEXT's
        #: ``length`` counts characters, so the store refuses what is not a BLOB)
        self._typeof = "" if self.pg else ", typeof(v)"
        self.size = q(f"SELECT {length}(v){self._typeof} FROM {t} WHERE k = ?")
        if self.pg:
            # One result column per requested piece of ``v``: whole, range, offset, suffix
            # (in that order of the kinds below); ``?`` are the request's parameters.
            self._pieces = {"v": "v", "r": "substring(v from ? for ?)",
                            "o": "substring(v from ?)",
                            "s": "substring(v from greatest(octet_length(v) - ? + 1, 1))",
                            "e": "''::bytea"}
            # Splice ``value`` in at ``offset``, padding with zero bytes past the end.
            self.splice = q(
                f"INSERT INTO {t} (k, v) VALUES (?, decode(repeat('00', ?), 'hex') || ?) "
                f"ON CONFLICT (k) DO UPDATE SET v = substring({t}.v from 1 for ?) "
                f"|| decode(repeat('00', greatest(? - octet_length({t}.v), 0)), 'hex') "
                f"|| ? || substring({t}.v from ?)")
        else:
            # substr() of an empty BLOB is NULL: callers read NULL as b"".
            self._pieces = {"v": "v", "r": "substr(v, ?, ?)", "o": "substr(v, ?)",
                            "s": "substr(v, max(length(v) - ? + 1, 1))", "e": "x''"}
            # ``||`` yields TEXT in SQLite; the CAST keeps the bytes and makes them a BLOB.
            self.splice = q(
                f"INSERT INTO {t} (k, v) VALUES (?, CAST(zeroblob(?) || ? AS BLOB)) "
                f"ON CONFLICT (k) DO UPDATE SET v = CAST(coalesce(substr(v, 1, ?), x'') "
                f"|| zeroblob(max(? - length(v), 0)) || ? || coalesce(substr(v, ?), x'') "
                f"AS BLOB)")
        self.upsert = q(f"INSERT INTO {t} (k, v) VALUES (?, ?) "
                        f"ON CONFLICT (k) DO UPDATE SET v = excluded.v")
        self.delete = q(f"DELETE FROM {t} WHERE k = ?")
        #: reads the table, returns nothing: starts a read transaction's snapshot
        self.pin = f"SELECT 1 FROM {t} WHERE 0"
        self.delete_range = q(f"DELETE FROM {t} WHERE k >= ? AND k < ?")
        self.delete_from = q(f"DELETE FROM {t} WHERE k >= ?")
        self._t = t
        self._cache: dict[Any, str] = {}
        self.segments = segments
        if segments is not None:
            self._init_segments(f'"{segments}"', q, length)
        if not self.pg:
            #: SQLite: a value's row id, length and storage class, and the value itself
            #: when it is shorter than the first parameter (a longer one is read in
            #: pieces through a BLOB handle); with a segments table, its segment map last
            segment_map = f", {self._segment_map}" if segments is not None else ""
            self.locate = q(f"SELECT m.rowid, length(m.v), typeof(m.v), CASE WHEN "
                            f"length(m.v) < ? THEN m.v END{segment_map} FROM {t} AS m "
                            f"WHERE m.k = ?")
            #: prepares only if the table has row ids (not WITHOUT ROWID)
            self.has_rowid = f"SELECT rowid FROM {t} LIMIT 0"

    def _init_segments(self, s: str, q: Any, length: str) -> None:
        """The statements of appended values (stores/sql.md, "Appended values"): the
        segment ``v`` of key ``k`` ends at byte ``e`` of the value, whose own row holds
        an empty ``v``."""
        t = self._t
        empty = "''::bytea" if self.pg else "x''"
        self._s = s
        # One statement: the size of a value whatever its layout; the subquery runs only
        # for an empty row (appended or empty).
        self.size = q(f"SELECT CASE WHEN {length}(m.v) > 0 THEN {length}(m.v) ELSE "
                      f"coalesce((SELECT max(s.e) FROM {s} AS s WHERE s.k = m.k), 0) END"
                      f"{self._typeof.replace('(v)', '(m.v)')} FROM {t} AS m WHERE m.k = ?")
        self.seg_values = q(f"SELECT v FROM {s} WHERE k = ? ORDER BY e")
        self.seg_size = q(f"SELECT max(e) FROM {s} WHERE k = ?")
        self.seg_insert = q(f"INSERT INTO {s} (k, e, v) VALUES (?, ?, ?)")
        # the row's bytes become the first segment, inside the database
        self.seg_take = q(f"INSERT INTO {s} (k, e, v) SELECT k, {length}(v), v FROM {t} "
                          f"WHERE k = ?")
        self.mark_appended = q(f"UPDATE {t} SET v = {empty} WHERE k = ?")
        self.seg_delete = q(f"DELETE FROM {s} WHERE k = ?")
        self.seg_delete_range = q(f"DELETE FROM {s} WHERE k >= ? AND k < ?")
        self.seg_delete_from = q(f"DELETE FROM {s} WHERE k >= ?")
        self.seg_any = f"SELECT 1 FROM {s} LIMIT 1"
        self.seg_of = q(f"SELECT 1 FROM {s} WHERE k = ? LIMIT 1")
        self._piece = ("substring(v from ? for ?)" if self.pg else "substr(v, ?, ?)")
        entry = (f"s.e::text || ':' || {length}(s.v)::text" if self.pg
                 else f"s.e || ':' || {length}(s.v)")
        agg = f"string_agg({entry}, ' ')" if self.pg else f"group_concat({entry}, ' ')"
        self._segment_map = (f"CASE WHEN {length}(m.v) = 0 THEN coalesce((SELECT {agg} "
                             f"FROM {s} AS s WHERE s.k = m.k), '') END")

    # -- statements built per shape ------------------------------------------------------

    def _in_list(self, head: str, n: int) -> str:
        key = (head, n)
        sql = self._cache.get(key)
        if sql is None:
            sql = f"{head} WHERE k IN ({', '.join([self._ph] * n)})"
            self._cache[key] = sql
        return sql

    def keys_page(self, inclusive: bool, bounded: bool) -> str:
        """``SELECT k`` from a lower bound (inclusive or not) up to an optional exclusive
        upper bound, in key order, at most ``LIMIT`` rows."""
        key = ("page", inclusive, bounded)
        sql = self._cache.get(key)
        if sql is None:
            p = self._ph
            where = f"k {'>=' if inclusive else '>'} {p}" + (f" AND k < {p}" if bounded else "")
            sql = f"SELECT k FROM {self._t} WHERE {where} ORDER BY k LIMIT {p}"
            self._cache[key] = sql
        return sql

    def keys_joined(self, inclusive: bool, bounded: bool) -> str:
        """A page as :meth:`keys_page` selects it, as one row: the keys joined by a
        backslash (a character no key holds), and their number."""
        key = ("joined", inclusive, bounded)
        sql = self._cache.get(key)
        if sql is None:
            agg = ("string_agg(k, chr(92) ORDER BY k)" if self.pg
                   else "group_concat(k, '\\')")  # SQLite: no escapes in literals
            sql = f"SELECT {agg}, count(*) FROM ({self.keys_page(inclusive, bounded)}) AS page"
            self._cache[key] = sql
        return sql

    # -- operations ----------------------------------------------------------------------

    def ranges(self, key: str, requests: Sequence[ByteRequest | None]) -> tuple[str, list]:
        """``SELECT`` of the requested pieces of one value as the columns of one row
        (None = the whole value), and its parameters. Offsets are 1-based in SQL. With a
        segments table, a last column holds the segment map of an appended value
        (``"e:length e:length ..."``, in any order), computed only for an empty row: NULL
        for any other row, ``''`` for an empty value."""
        kinds: list[str] = []
        params: list[Any] = []
        top = SQL_INT_MAX
        for r in requests:
            if r is None:
                kinds.append("v")
            elif isinstance(r, RangeRequest):
                # Every number stays below SQL_INT_MAX (see there): a range that starts
                # past any value the database can hold is empty.
                start = r.start
                if start >= top or r.end == start:
                    kinds.append("e")
                else:
                    kinds.append("r")
                    params += (start + 1, min(r.end - start, top))
            elif isinstance(r, OffsetRequest):
                if r.offset >= top:
                    kinds.append("e")
                else:
                    kinds.append("o")
                    params.append(r.offset + 1)
            elif isinstance(r, SuffixRequest):
                if r.suffix == 0:
                    kinds.append("e")
                else:
                    kinds.append("s")
                    params.append(min(r.suffix, top))
            else:
                raise ValueTypeError(f"not a byte request: {r!r}")
        params.append(key)
        shape = ("ranges", *kinds)
        sql = self._cache.get(shape)
        if sql is None:
            columns = ", ".join([self._pieces[k] for k in kinds]
                                + ([self._segment_map] if self.segments is not None else []))
            sql = f"SELECT {columns} FROM {self._t} AS m WHERE m.k = ?".replace("?", self._ph)
            if len(self._cache) < 4096:  # shapes are few in practice; never unbounded
                self._cache[shape] = sql
        return sql, params

    def segment_pieces(self, cur: Any, key: str,
                       pieces: Sequence[tuple[int, int, int]]) -> list[Any]:
        """The bytes of ``pieces`` of the segments of ``key``, each ``(e, start,
        length)``: ``length`` bytes from ``start`` (0-based) of the segment ending at
        ``e``; one ``UNION ALL`` statement per :data:`MAX_RANGES` pieces."""
        out: list[Any] = []
        for i in range(0, len(pieces), MAX_RANGES):
            part = pieces[i:i + MAX_RANGES]
            sql = self._cache.get(("pieces", len(part)))
            if sql is None:
                one = f"SELECT {{n}}, {self._piece} FROM {self._s} WHERE k = ? AND e = ?"
                sql = " UNION ALL ".join(one.format(n=n) for n in range(len(part)))
                sql = sql.replace("?", self._ph)
                self._cache[("pieces", len(part))] = sql
            params: list[Any] = []
            for e, start, length in part:
                params += (start + 1, length, key, e)
            cur.execute(sql, params)
            got = dict(cur.fetchall())
            if len(got) != len(part):    # the map was read in this snapshot: never absent
                raise StoreError(f"{len(part) - len(got)} segment(s) of an appended value "
                                 f"are missing from the segments table", key=key)
            out.extend(got[n] for n in range(len(part)))
        return out

    def delete_segments(self, cur: Any, keys: Iterable[str]) -> None:
        """Drop the segments of ``keys`` (their values are being replaced or erased)."""
        self._delete_keys(cur, self._s, keys)

    def get_many(self, cur: Any, keys: Sequence[str]) -> dict[str, Any]:
        if not keys:
            return {}
        if len(keys) <= BATCH:  # one statement; a key asked twice is found once
            params = keys if isinstance(keys, (list, tuple)) else list(keys)
            cur.execute(self._in_list(f"SELECT k, v FROM {self._t}", len(keys)), params)
            return dict(cur.fetchall())
        found: dict[str, Any] = {}
        for _ in self._in_batches(cur, f"SELECT k, v FROM {self._t}",
                                  list(dict.fromkeys(keys))):
            found.update(cur.fetchall())
        return found

    def iter_many(self, cur: Any, keys: Sequence[str]) -> Iterator[tuple[str, Any]]:
        """``(key, value)`` rows of ``keys`` (no key twice), taken from the cursor one at
        a time, :data:`BATCH` keys per statement."""
        for _ in self._in_batches(cur, f"SELECT k, v FROM {self._t}", keys):
            for row in cur:
                yield row[0], row[1]

    def existing(self, cur: Any, keys: Sequence[str]) -> set[str]:
        """Which of ``keys`` exist (keys only: no value leaves the database)."""
        found: set[str] = set()
        for _ in self._in_batches(cur, f"SELECT k FROM {self._t}", list(dict.fromkeys(keys))):
            found.update(row[0] for row in cur.fetchall())
        return found

    def _in_batches(self, cur: Any, head: str, keys: Sequence[str]) -> Iterator[None]:
        """Run ``head WHERE k IN (...)`` over ``keys`` (no key twice), :data:`BATCH` keys
        per statement; after each statement yield, its rows waiting on ``cur``."""
        for i in range(0, len(keys), BATCH):
            part = list(keys[i:i + BATCH])
            cur.execute(self._in_list(head, len(part)), part)
            yield

    def set_many(self, cur: Any, items: Sequence[tuple[str, bytes]]) -> None:
        if not self.pg:
            # One prepared statement, executed per row: the fastest path SQLite offers.
            cur.executemany(self.upsert, items)
            return
        # PostgreSQL: multi-row INSERTs. A key may appear once per statement, so keep the
        # last value of each key, as sequential sets would.
        rows = list(dict(items).items())
        for i in range(0, len(rows), BATCH):
            part = rows[i:i + BATCH]
            values = ", ".join([f"({self._ph}, {self._ph})"] * len(part))
            cur.execute(f"INSERT INTO {self._t} (k, v) VALUES {values} "
                        f"ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                        [x for row in part for x in row])

    def set_range(self, cur: Any, key: str, offset: int, value: bytes) -> None:
        """Splice ``value`` in at ``offset``; the caller checked that the result fits
        below :data:`SQL_INT_MAX` (so no argument is truncated)."""
        end = offset + len(value) + 1
        cur.execute(self.splice, (key, offset, value, offset, offset, value, end))

    def erase_many(self, cur: Any, keys: Iterable[str]) -> None:
        self._delete_keys(cur, self._t, keys)

    def _delete_keys(self, cur: Any, table: str, keys: Iterable[str]) -> None:
        """``DELETE FROM table WHERE k IN (...)`` for ``keys``, once each, in batches."""
        unique = list(dict.fromkeys(keys))
        head = f"DELETE FROM {table}"
        for i in range(0, len(unique), BATCH):
            part = unique[i:i + BATCH]
            cur.execute(self._in_list(head, len(part)), part)

    def erase_range(self, cur: Any, low: str, high: str | None) -> None:
        if high is None:
            cur.execute(self.delete_from, (low,))
        else:
            cur.execute(self.delete_range, (low, high))

    def keys(self, cur: Any, low: str, high: str | None, *, inclusive: bool = True,
             limit: int) -> list[str]:
        """Up to ``limit`` keys in ``[low, high)`` (``(low, high)`` if not inclusive)."""
        params: tuple = (low, high, limit) if high is not None else (low, limit)
        cur.execute(self.keys_page(inclusive, high is not None), params)
        return [row[0] for row in cur.fetchall()]

    def joined_keys(self, low: str, high: str | None, *, inclusive: bool = True,
                    limit: int) -> tuple[str, tuple]:
        """The statement and parameters that read the page :meth:`keys` reads as one row:
        (its keys joined by a backslash, or NULL; their number). The order inside the
        string is the engine's; callers that need the last key take the largest."""
        params: tuple = (low, high, limit) if high is not None else (low, limit)
        return self.keys_joined(inclusive, high is not None), params
