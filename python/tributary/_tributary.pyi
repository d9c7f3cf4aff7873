"""Type stub of the native module ``tributary._tributary`` (Rust, PyO3).
The public API is :mod:`tributary`, which wraps it."""

from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa

__version__: str

class TributaryError(Exception):
    """Base class of every error Tributary raises."""

class InvalidInputError(TributaryError):
    """The caller's input is wrong: fix it and try again. Nothing was committed."""

class CorruptDataError(TributaryError):
    """Data on storage is damaged or contradicts itself. Retrying will not help."""

class UnavailableError(TributaryError):
    """Storage, the network or a lock is unavailable right now: retry later."""

class ConflictError(TributaryError):
    """Another actor got there first: start over."""

class FencedError(ConflictError):
    """A newer writer registered this writer id: stop rather than retry."""

class InternalError(TributaryError):
    """A bug in Tributary: please report it."""

class Table:
    def __init__(self, uri: str, *, storage_options: Mapping[str, str] | None = None) -> None: ...
    @property
    def uri(self) -> str: ...
    @property
    def name(self) -> str: ...
    def _write(
        self, data: Any, *, writer_id: str | None = None, checkpoint: str | None = None
    ) -> dict[str, Any]: ...
    def writer(self, *, writer_id: str | None = None) -> Writer: ...
    def read(
        self,
        columns: Sequence[str] | None,
        filter: Any,
        as_of: str | None,
        query: str,
        begin: str | None,
        end: str | None,
        stream: bool,
    ) -> pa.Table | Batches: ...
    def changes(self, begin: str | None, end: str | None) -> tuple[pa.Table, str, str]: ...
    def schema(self) -> pa.Schema: ...
    def avro_schema(self) -> str: ...
    def compact(self) -> list[dict[str, Any]]: ...
    def write_change_log(self) -> dict[str, Any] | None: ...
    def clean(
        self, *, retain_commits: int | None = None, retain_hours: int | None = None
    ) -> dict[str, Any] | None: ...
    def timeline(self) -> list[dict[str, Any]]: ...
    def checkpoint(self, writer_id: str) -> str | None: ...
    def __datafusion_table_provider__(self, session: Any) -> object: ...

class Batches(Iterator[pa.RecordBatch]):
    @property
    def changes(self, begin: str | None, end: str | None) -> tuple[pa.Table, str, str]: ...
    def schema(self) -> pa.Schema: ...
    def __iter__(self) -> Batches: ...
    def __next__(self) -> pa.RecordBatch: ...

class Writer:
    @property
    def writer_id(self) -> str: ...
    @property
    def instant(self) -> str | None: ...
    @property
    def is_open(self) -> bool: ...
    def _write(self, data: Any) -> None: ...
    def commit(self, checkpoint: str | None = None) -> dict[str, Any]: ...
    def abort(self) -> None: ...

def create(
    uri: str,
    schema: pa.Schema | str,
    record_key: str | Sequence[str],
    ordering_field: str | Sequence[str],
    *,
    partition_by: str | None = None,
    buckets: int = 16,
    storage_options: Mapping[str, str] | None = None,
) -> Table: ...
def sql(
    query: str,
    tables: Mapping[str, Table | str],
    *,
    storage_options: Mapping[str, str] | None = None,
    stream: bool = False,
) -> pa.Table | Batches: ...
def avro_schema_of(schema: pa.Schema, name: str = "tributary") -> str: ...
