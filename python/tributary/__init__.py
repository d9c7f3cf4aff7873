"""Tributary: many streaming writers upserting into one Apache Hudi
Merge-on-Read table at once, without aborting each other.

>>> import pyarrow as pa, tributary
>>> schema = pa.schema([pa.field("id", pa.string(), nullable=False),
...                     pa.field("ts", pa.int64(), nullable=False),
...                     ("city", pa.string()), ("fare", pa.float64())])
>>> table = tributary.create("/tmp/trips", schema, record_key="id",
...                          ordering_field="ts", partition_by="city")  # doctest: +SKIP
>>> table.write(pa.table({"id": ["a"], "ts": [1], "city": ["sf"], "fare": [9.5]}))  # doctest: +SKIP
>>> table.to_pyarrow()  # doctest: +SKIP

The GIL is released while a call does IO or merges, so threads of one
process write and read in parallel. Errors are raised as subclasses of
:class:`TributaryError`, one per kind of error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal, Mapping, Sequence, Union

import pyarrow as pa

from . import _tributary
from ._tributary import (
    ConflictError,
    CorruptDataError,
    FencedError,
    InternalError,
    InvalidInputError,
    TributaryError,
    UnavailableError,
)

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import polars

__version__: str = _tributary.__version__

__all__ = [
    "Table",
    "Writer",
    "Changes",
    "create",
    "sql",
    "avro_schema_of",
    "TributaryError",
    "InvalidInputError",
    "CorruptDataError",
    "UnavailableError",
    "ConflictError",
    "FencedError",
    "InternalError",
]

#: One filter term: ``(column, op, value)`` with op one of ``=``, ``!=``,
#: ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``.
FilterTerm = tuple[str, str, Any]
#: A filter: terms that must all hold, or a list of such lists of which one
#: must (pyarrow's and deltalake's ``filters`` form).
Filter = Union[Sequence[FilterTerm], Sequence[Sequence[FilterTerm]]]
#: Which rows a read returns.
Query = Literal["snapshot", "read_optimized", "incremental"]


def _as_stream(data: Any, schema: Callable[[], pa.Schema]) -> Any:
    """``data`` as an object with ``__arrow_c_stream__``; a pandas
    DataFrame is converted by :func:`_from_pandas`, with ``schema`` (the
    table's) at hand."""
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    module = type(data).__module__.split(".")[0]
    if module == "pandas":
        return _from_pandas(data, schema)
    if hasattr(data, "__arrow_c_stream__"):
        return data
    if module == "polars" and hasattr(data, "to_arrow"):
        return data.to_arrow()
    raise TypeError(
        "data must be a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or "
        f"Polars DataFrame, or have __arrow_c_stream__; got {type(data).__name__}"
    )


class Table:
    """A Hudi Merge-on-Read table (table version 8) that many writers upsert
    into at once.

    ``Table(uri)`` opens the table at ``uri``: a local path, ``file://``,
    ``s3://``, ``gs://`` or ``az://``. ``storage_options`` configure the
    object store (``endpoint``, ``region``, ``access_key_id``,
    ``allow_http``, ...), after the environment's ``AWS_*`` and similar.
    """

    __slots__ = ("_table",)

    def __init__(self, uri: str, *, storage_options: Mapping[str, str] | None = None) -> None:
        self._table = _tributary.Table(str(uri), storage_options=_options(storage_options))

    @classmethod
    def _wrap(cls, native: _tributary.Table) -> "Table":
        table = cls.__new__(cls)
        table._table = native
        return table

    @property
    def uri(self) -> str:
        """The URI the table was opened with."""
        return self._table.uri

    @property
    def name(self) -> str:
        """The table's name (``hoodie.table.name``)."""
        return self._table.name

    def __repr__(self) -> str:
        return repr(self._table)

    def write(
        self,
        data: Any,
        *,
        writer_id: str | None = None,
        checkpoint: str | None = None,
    ) -> dict[str, Any]:
        """Upserts ``data`` in one commit, and returns its summary.

        ``data`` is a pyarrow Table, RecordBatch or RecordBatchReader, a
        pandas or Polars DataFrame, or anything with ``__arrow_c_stream__``.
        Columns are matched to the table's by name and cast to their types;
        a missing nullable column is null. A boolean ``_hoodie_is_deleted``
        column marks deletes. Each key keeps the version with the greatest
        ordering value, whatever order versions arrive in.

        With ``writer_id``, the id is registered first (a newer writer with
        the same id fences this one: :class:`FencedError`), and
        ``checkpoint`` (a source offset, say) is recorded with the commit in
        the same atomic step: :meth:`checkpoint` returns it exactly when the
        commit is visible.

        Bad input raises :class:`InvalidInputError` naming the column, and
        nothing of the commit becomes visible.

        Returns ``{"instant", "completed", "rows", "records", "files",
        "bytes", "writer_id"}``.
        """
        data = _as_stream(data, self._table.schema)
        return self._table._write(data, writer_id=writer_id, checkpoint=checkpoint)

    def writer(self, *, writer_id: str | None = None) -> "Writer":
        """Starts one commit that several :meth:`Writer.write` calls add to:

        >>> with table.writer(writer_id="app") as w:  # doctest: +SKIP
        ...     for batch in batches:
        ...         w.write(batch)
        ...     w.commit(checkpoint="offset=1042")

        ``writer_id`` is registered now, as by :meth:`write`. Leaving the
        ``with`` block without :meth:`Writer.commit` (or by an exception)
        aborts the commit: nothing of it becomes visible.
        """
        return Writer(self._table.writer(writer_id=writer_id), self._table.schema)

    def to_pyarrow(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
        as_of: str | None = None,
        query: Query = "snapshot",
        begin: str | None = None,
        end: str | None = None,
    ) -> pa.Table:
        """The latest snapshot (or the one ``as_of`` an instant, 17 digits),
        merged, as a :class:`pyarrow.Table`; rows come in no fixed order.

        ``columns`` picks and orders columns (``_hoodie_*`` meta columns may
        be named). ``filter`` keeps rows it is true on, e.g.
        ``[("city", "=", "sf"), ("fare", ">", 10)]``; partitions and buckets
        it rules out are not read.

        ``query`` is ``"snapshot"`` (base files and logs merged),
        ``"read_optimized"`` (base files only: what the last compaction
        wrote) or ``"incremental"``: what the commits completed after
        ``begin`` and up to ``end`` (instants; open when omitted) wrote.
        """
        return self._table.read(_columns(columns), filter, as_of, query, begin, end, False)

    def to_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
        as_of: str | None = None,
        query: Query = "snapshot",
        begin: str | None = None,
        end: str | None = None,
    ) -> pa.RecordBatchReader:
        """:meth:`to_pyarrow` as a stream: a :class:`pyarrow.RecordBatchReader`
        whose batches come as file slices are merged, a few at once."""
        batches = self._table.read(_columns(columns), filter, as_of, query, begin, end, True)
        return _reader(batches)

    def to_pandas(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
        as_of: str | None = None,
        query: Query = "snapshot",
        begin: str | None = None,
        end: str | None = None,
    ) -> "pandas.DataFrame":
        """:meth:`to_pyarrow` as a pandas DataFrame."""
        return self.to_pyarrow(columns, filter, as_of, query, begin, end).to_pandas()

    def to_polars(
        self,
        columns: Sequence[str] | None = None,
        filter: Filter | None = None,
        as_of: str | None = None,
        query: Query = "snapshot",
        begin: str | None = None,
        end: str | None = None,
    ) -> "polars.DataFrame":
        """:meth:`to_pyarrow` as a Polars DataFrame (Polars must be
        installed; it is not a dependency)."""
        import polars

        return polars.from_arrow(self.to_pyarrow(columns, filter, as_of, query, begin, end))

    def changes(self, begin: str | None = None, end: str | None = None) -> "Changes":
        """The change feed of the commits that completed after ``begin`` and
        up to ``end`` (completion times; open when omitted): for each
        commit, in completion order, each key whose visible row it changed.
        Rows have ``op`` (``"i"``, ``"u"``, ``"d"``), ``commit_time``,
        ``completion_time``, ``partition_path``, ``record_key``, and the
        rows ``before`` and ``after`` as structs. A late event that lost to
        a newer one changes nothing. Follow a table by passing each
        window's ``end`` as the next ``begin``.
        """
        rows, first, last = self._table.changes(begin, end)
        return Changes(rows, first, last)

    def schema(self) -> pa.Schema:
        """The schema in force, without the ``_hoodie_*`` meta columns."""
        return self._table.schema()

    def avro_schema(self) -> str:
        """The schema in force, as the Avro schema JSON Hudi records."""
        return self._table.avro_schema()

    def compact(self) -> list[dict[str, Any]]:
        """Compacts the file groups that are due (merging their logs into
        new base files), and returns a summary per compaction executed."""
        return self._table.compact()

    def write_change_log(self) -> dict[str, Any] | None:
        """On a table created with ``change_log=True``: records the changes
        of the commits completed since the last run as Hudi CDC files, which
        Spark's CDC query reads. Returns ``{"instant", "completed", "begin",
        "changes", "files", "bytes"}``, or ``None`` when no commit completed
        since. A table without a change log raises
        :class:`InvalidInputError`."""
        return self._table.write_change_log()

    def clean(
        self, *, retain_commits: int | None = None, retain_hours: int | None = None
    ) -> dict[str, Any] | None:
        """Rolls back a few failed writes, then deletes the file slices no
        retained commit needs: those of the last ``retain_commits`` commits
        (10 by default), or of the commits requested in the last
        ``retain_hours`` hours. Returns the clean's summary, or ``None``
        when there was nothing to delete. Time travel (``as_of``) before
        the earliest retained commit is refused afterwards."""
        return self._table.clean(retain_commits=retain_commits, retain_hours=retain_hours)

    def timeline(self) -> list[dict[str, Any]]:
        """The instants of the timeline by requested time: ``{"requested",
        "action", "state", "completed"}``."""
        return self._table.timeline()

    def checkpoint(self, writer_id: str) -> str | None:
        """The checkpoint of the last visible commit of ``writer_id`` that
        carried one, or ``None``."""
        return self._table.checkpoint(writer_id)

    def __datafusion_table_provider__(self, session: Any) -> object:
        """The table's snapshot as a provider for DataFusion-Python (the
        ``datafusion`` package, of the major version of the DataFusion
        Tributary is built with):

        >>> from datafusion import SessionContext  # doctest: +SKIP
        >>> ctx = SessionContext()  # doctest: +SKIP
        >>> ctx.register_table("trips", table)  # doctest: +SKIP
        >>> ctx.sql("SELECT city, count(*) FROM trips GROUP BY city").to_arrow_table()  # doctest: +SKIP

        Projections, filters and limits are pushed into Tributary's scan,
        as for :func:`sql`."""
        return self._table.__datafusion_table_provider__(session)


class Changes:
    """A window of the change feed (:meth:`Table.changes`)."""

    __slots__ = ("rows", "begin", "end")

    def __init__(self, rows: pa.Table, begin: str, end: str) -> None:
        #: One row per change, by completion time, then partition and key.
        self.rows = rows
        #: The window's exclusive start (a completion time).
        self.begin = begin
        #: The window's inclusive end: where the next window begins.
        self.end = end

    def __repr__(self) -> str:
        return f"Changes({self.rows.num_rows} rows in ({self.begin}, {self.end}])"


class Writer:
    """One open commit of a table (:meth:`Table.writer`): add data with
    :meth:`write`, then :meth:`commit` or :meth:`abort`. A context manager
    that aborts an uncommitted commit on exit. A failed :meth:`write`
    aborts the commit."""

    __slots__ = ("_writer", "_schema")

    def __init__(self, native: _tributary.Writer, schema: Callable[[], pa.Schema]) -> None:
        self._writer = native
        self._schema = schema

    @property
    def writer_id(self) -> str:
        """The writer id the commit is made under."""
        return self._writer.writer_id

    @property
    def instant(self) -> str | None:
        """The commit's instant while it is open."""
        return self._writer.instant

    @property
    def is_open(self) -> bool:
        """Whether the commit is still open."""
        return self._writer.is_open

    def __repr__(self) -> str:
        return repr(self._writer)

    def write(self, data: Any) -> None:
        """Adds ``data`` (as :meth:`Table.write` takes it) to the commit."""
        self._writer._write(_as_stream(data, self._schema))

    def commit(self, checkpoint: str | None = None) -> dict[str, Any]:
        """Completes the commit, recording ``checkpoint`` under the writer
        id in the same atomic step, and returns its summary."""
        return self._writer.commit(checkpoint)

    def abort(self) -> None:
        """Withdraws the commit, deleting what it wrote."""
        self._writer.abort()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc: object) -> None:
        self._writer.abort()


def create(
    uri: str,
    schema: pa.Schema | str,
    record_key: str | Sequence[str],
    ordering_field: str | Sequence[str],
    *,
    partition_by: str | None = None,
    buckets: int = 16,
    change_log: bool = False,
    storage_options: Mapping[str, str] | None = None,
) -> Table:
    """Creates a Hudi Merge-on-Read table (version 8) at ``uri`` and
    returns it.

    ``schema`` is a :class:`pyarrow.Schema` (converted to the Avro schema
    Hudi records: :func:`avro_schema_of`) or an Avro schema JSON string.
    ``record_key`` names the key column (several for a composite key);
    ``ordering_field`` the event-time column that decides which version of
    a key wins. ``partition_by`` names a partition column; ``buckets`` is
    the number of buckets per partition. With ``change_log``, the table
    keeps a change log for Spark's CDC query (:meth:`Table.write_change_log`).
    """
    native = _tributary.create(
        str(uri),
        schema,
        _names(record_key),
        _names(ordering_field),
        partition_by=partition_by,
        buckets=buckets,
        change_log=change_log,
        storage_options=_options(storage_options),
    )
    return Table._wrap(native)


def sql(
    query: str,
    tables: Mapping[str, "Table | str"],
    *,
    storage_options: Mapping[str, str] | None = None,
    stream: bool = False,
) -> pa.Table | pa.RecordBatchReader:
    """Runs the SQL ``query`` (Apache DataFusion's dialect) over ``tables``,
    each by its name, and returns its rows as a :class:`pyarrow.Table`, or
    with ``stream`` as a :class:`pyarrow.RecordBatchReader` read as the
    query runs.

    A table is a :class:`Table` (its latest snapshot) or a URI, opened with
    ``storage_options``, which may end in options after ``@``:
    ``@as-of=T`` (time travel to instant ``T``), ``@read-optimized``, or
    ``@incremental=BEGIN..END`` (what the commits completed in that window
    wrote), or ``@changes=BEGIN..END`` (that window's change feed, as
    :meth:`Table.changes` gives it), as ``tributary sql --table`` takes
    them:

    >>> tributary.sql(  # doctest: +SKIP
    ...     "SELECT n.id, n.fare - o.fare AS change FROM n JOIN o ON n.id = o.id",
    ...     tables={"n": table, "o": f"{table.uri}@as-of=20250101000000000"})

    The ``_hoodie_*`` meta columns can be selected. Filters on columns,
    projections and limits are pushed into the scans. A syntax error, or
    an unknown table or column, raises :class:`InvalidInputError` with
    DataFusion's message.
    """
    natives = {str(name): (t._table if isinstance(t, Table) else str(t)) for name, t in tables.items()}
    out = _tributary.sql(query, natives, storage_options=_options(storage_options), stream=stream)
    return _reader(out) if stream else out


def avro_schema_of(schema: pa.Schema, name: str = "tributary") -> str:
    """The Avro schema JSON :func:`create` makes a table named ``name`` of
    from ``schema``."""
    return _tributary.avro_schema_of(schema, name)


def _reader(batches: _tributary.Batches) -> pa.RecordBatchReader:
    """Native batches as a :class:`pyarrow.RecordBatchReader`; an error
    while reading raises Tributary's exception of its kind."""
    return pa.RecordBatchReader.from_batches(batches.schema, batches)


def _from_pandas(df: "pandas.DataFrame", schema: Callable[[], pa.Schema]) -> pa.Table:
    """``df`` (its index left out) as a pyarrow Table, with the types
    pyarrow infers. pandas holds maps, decimals and nested values as Python
    objects, and a map (a list of pairs) is one it cannot infer: then the
    columns the table has take the table's types (``schema()``, read only
    then). Should that fail too, :class:`InvalidInputError` says why, with
    pyarrow's message naming the column."""
    try:
        return pa.Table.from_pandas(df, preserve_index=False)
    except (pa.ArrowException, ValueError, TypeError) as inferred:
        known = schema()
        fields = [
            known.field(str(c)).with_nullable(True)
            if str(c) in known.names
            else pa.Schema.from_pandas(df[[c]], preserve_index=False).field(0)
            for c in df.columns
        ]
        try:
            return pa.Table.from_pandas(df, schema=pa.schema(fields), preserve_index=False)
        except (pa.ArrowException, ValueError, TypeError):
            raise InvalidInputError(f"data: {inferred}") from inferred


def _names(value: str | Iterable[str]) -> str | list[str]:
    return value if isinstance(value, str) else [str(v) for v in value]


def _columns(columns: Sequence[str] | None) -> list[str] | None:
    return None if columns is None else [str(c) for c in columns]


def _options(options: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if options is None else {str(k): str(v) for k, v in options.items()}
