//! Turning caller input into validated Arrow rows of the table schema.
//!
//! Two doors: Arrow [`RecordBatch`](arrow::array::RecordBatch)es (columns matched by name and cast to
//! the table's types) and JSON values (one object per record, as JSON lines
//! or through the row API). Either way every record is checked: the key and
//! the ordering value must be present and non-null, types must match, and
//! unknown columns are refused. Key fields must be present (they take no
//! schema default); a composite key's nullable field may be null (its value
//! is then written `__null__`), but not all of them. Each record's
//! `_hoodie_record_key` is built here, by the one rule of
//! [`tributary_format::key`]. A `_hoodie_is_deleted: true`
//! record deletes its key. Errors name the record (line), the field and the
//! reason.
//!
//! The Arrow door is `batch`, the JSON door `json` (with the columns built
//! value by value in `column` and record by record in `rows_builder`);
//! both produce [`Rows`] (`rows`).

mod batch;
mod column;
mod evolve;
mod json;
mod rows;
mod rows_builder;
mod scalar;
#[cfg(test)]
mod tests;

pub use batch::rows_from_batch;
pub use evolve::{InputEvolution, schema_evolution_in_json_lines};
pub(crate) use json::rows_from_json;
pub use json::rows_from_json_lines;
pub use rows::Rows;
