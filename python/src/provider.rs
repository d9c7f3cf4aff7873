//! `Table.__datafusion_table_provider__`: a table as the provider capsule
//! that DataFusion-Python (`datafusion` on PyPI) registers a table by.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow::datatypes::SchemaRef;
use async_trait::async_trait;
use datafusion_ffi::proto::logical_extension_codec::FFI_LogicalExtensionCodec;
use datafusion_ffi::table_provider::FFI_TableProvider;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;
use tokio::runtime::Handle;
use tributary::Table;
use tributary::sql::datafusion::catalog::{Session, TableProvider};
use tributary::sql::datafusion::datasource::TableType;
use tributary::sql::datafusion::error::Result as DfResult;
use tributary::sql::datafusion::logical_expr::{Expr, TableProviderFilterPushDown};
use tributary::sql::datafusion::physical_plan::ExecutionPlan;
use tributary::sql::{ReadAs, TributaryTable};

use crate::errors::no_runtime;
use crate::runtime::{block, runtime};

/// The logical codec in DataFusion-Python's session capsule (or the
/// capsule itself), as `datafusion-python-util` reads it.
fn logical_codec(session: &Bound<'_, PyAny>) -> PyResult<FFI_LogicalExtensionCodec> {
    const METHOD: &str = "__datafusion_logical_extension_codec__";
    let capsule = match session.hasattr(METHOD)? {
        true => session.call_method0(METHOD)?,
        false => session.clone(),
    };
    let capsule = capsule.cast::<PyCapsule>()?;
    let data: NonNull<FFI_LogicalExtensionCodec> =
        capsule.pointer_checked(Some(c"datafusion_logical_extension_codec"))?.cast();
    // SAFETY: `pointer_checked` has checked the capsule's name, which
    // DataFusion-Python gives only to a capsule holding an
    // `FFI_LogicalExtensionCodec` (of the same major version, as the
    // package's dependency pins); the capsule outlives this borrow, and
    // the codec is cloned out of it through its own `clone`.
    #[allow(unsafe_code)]
    let codec = unsafe { data.as_ref() };
    Ok(codec.clone())
}

/// A future polled inside a runtime's context, so that what it spawns
/// (blocking file reads, timers, connections) goes to that runtime.
struct Entered<F: ?Sized> {
    handle: Handle,
    future: Pin<Box<F>>,
}

impl<F: Future + ?Sized> Future for Entered<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.get_mut();
        let _entered = this.handle.enter();
        this.future.as_mut().poll(cx)
    }
}

/// Tributary's provider for a DataFusion across the FFI boundary, which
/// plans on its own copy of tokio: planning (listing the timeline, reading
/// footers) runs in the module's runtime. Execution does too, as
/// `FFI_TableProvider` runs the plans it exports on the runtime it is
/// given.
#[derive(Debug)]
struct OnRuntime {
    provider: TributaryTable,
    handle: Handle,
}

#[async_trait]
impl TableProvider for OnRuntime {
    fn schema(&self) -> SchemaRef {
        self.provider.schema()
    }

    fn table_type(&self) -> TableType {
        self.provider.table_type()
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let future = self.provider.scan(state, projection, filters, limit);
        Entered { handle: self.handle.clone(), future }.await
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        self.provider.supports_filters_pushdown(filters)
    }
}

/// `Table.__datafusion_table_provider__(session)`: the table (its
/// snapshot) as a provider capsule for DataFusion-Python's `session`, its
/// scans run on the module's runtime.
pub(crate) fn provider_capsule<'py>(
    py: Python<'py>,
    table: &Table,
    session: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyCapsule>> {
    let codec = logical_codec(session)?;
    let table = table.clone();
    let provider = block(py, TributaryTable::new(table, ReadAs::default()))?;
    let rt = runtime().map_err(no_runtime)?;
    let handle = rt.handle().clone();
    let provider = OnRuntime { provider, handle: handle.clone() };
    let ffi = FFI_TableProvider::new_with_ffi_codec(Arc::new(provider), true, Some(handle), codec);
    PyCapsule::new_with_value(py, ffi, c"datafusion_table_provider")
}
