//! The native module of the `tributary` Python package
//! (`tributary._tributary`): a thin layer over the `tributary` crate.
//!
//! Every call that does IO or merges runs on one shared multi-thread tokio
//! runtime (`runtime.rs`) with the GIL released, so Python threads write and
//! read in parallel. Arrow data crosses in both directions through the
//! Arrow C data and stream interfaces (`arrow-pyarrow`), without copies.
//! Errors become the exceptions of `errors.rs`, one per error kind.

mod batches;
mod errors;
mod filter;
mod provider;
mod runtime;
mod schema;
mod sql;
mod table;
mod writer;

use pyo3::prelude::*;

/// The module `tributary._tributary`.
#[pymodule]
fn _tributary(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<table::PyTable>()?;
    m.add_class::<writer::PyWriter>()?;
    m.add_class::<batches::PyBatches>()?;
    m.add_function(wrap_pyfunction!(table::create, m)?)?;
    m.add_function(wrap_pyfunction!(sql::sql, m)?)?;
    m.add_function(wrap_pyfunction!(schema::avro_schema_of, m)?)?;
    errors::register(m)?;
    Ok(())
}
