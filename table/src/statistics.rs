//! What a base file's statistics say of a scan's filter: the row groups
//! in which no row can pass it are not read.
//!
//! A row group is ruled out only when its column statistics (minimum,
//! maximum and null count, as Parquet's footer keeps them) prove that the
//! filter is false or null on every row of it. Anything the statistics do
//! not settle keeps the group: a column the file lacks or holds in another
//! type than the table's (an older schema, before a promotion), floating
//! point columns (statistics leave NaN out, and the filter's order puts it
//! above every number), statistics a writer left out, and `NOT`. The
//! filter still runs on every row read, so pruning only saves reading.
//!
//! Only slices without logs read their base files so (`scan.rs`): a log
//! may hold a newer version of a row the statistics rule out.

use arrow::array::{Array, ArrayRef, BooleanArray, Scalar, UInt64Array};
use arrow::compute::kernels::{boolean, cmp};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::file::metadata::ParquetMetaData;
use tributary_merge::RowGroupFilter;

use crate::predicate::{CompareOp, Predicate};

/// A filter on the rows of a table with the Arrow schema `table` (meta
/// columns included), for the row groups of its base files.
#[derive(Debug, Clone)]
pub(crate) struct StatisticsFilter {
    pub(crate) predicate: Predicate,
    pub(crate) table: SchemaRef,
}

impl RowGroupFilter for StatisticsFilter {
    fn row_groups(&self, metadata: &ParquetMetaData, schema: &Schema) -> Vec<usize> {
        let stats = Stats { metadata, file: schema, table: &self.table };
        let keep = may_pass(&self.predicate, &stats);
        (0..metadata.num_row_groups()).filter(|&i| keep.as_ref().is_none_or(|k| k[i])).collect()
    }
}

/// The row groups of one file, and the two schemas its columns are
/// matched in.
struct Stats<'a> {
    metadata: &'a ParquetMetaData,
    file: &'a Schema,
    table: &'a Schema,
}

/// One column's statistics over a file's row groups; nulls where unknown.
struct Column {
    min: ArrayRef,
    max: ArrayRef,
    nulls: UInt64Array,
    rows: UInt64Array,
}

impl Stats<'_> {
    /// The statistics of `name`, when the file holds it in the table's
    /// type and that type orders as its statistics do.
    fn column(&self, name: &str) -> Option<Column> {
        let want = self.table.field_with_name(name).ok()?.data_type();
        let have = self.file.field_with_name(name).ok()?.data_type();
        if want != have || matches!(want, DataType::Float16 | DataType::Float32 | DataType::Float64) {
            return None;
        }
        let groups = self.metadata.row_groups();
        let c = StatisticsConverter::try_new(name, self.file, self.metadata.file_metadata().schema_descr())
            .ok()?
            .with_missing_null_counts_as_zero(false);
        Some(Column {
            min: c.row_group_mins(groups).ok()?,
            max: c.row_group_maxes(groups).ok()?,
            nulls: c.row_group_null_counts(groups).ok()?,
            rows: c.row_group_row_counts(groups).ok()??,
        })
    }
}

/// Per row group, whether a row of it may pass `p` (`None`: every one
/// may).
fn may_pass(p: &Predicate, stats: &Stats) -> Option<Vec<bool>> {
    match p {
        Predicate::Compare { column, op, value } => {
            let c = stats.column(column)?;
            let v = value.cast(c.min.data_type()).ok()?;
            compare(&c, *op, &v)
        }
        Predicate::InList { column, values, negated: false } => {
            let c = stats.column(column)?;
            let mut any: Option<Vec<bool>> = Some(vec![false; c.rows.len()]);
            for v in values {
                let v = v.cast(c.min.data_type()).ok()?;
                any = either(any, compare(&c, CompareOp::Eq, &v));
            }
            any
        }
        Predicate::IsNull { column, negated } => {
            let c = stats.column(column)?;
            Some(
                (0..c.rows.len())
                    .map(|i| {
                        !c.nulls.is_valid(i)
                            || if *negated { c.nulls.value(i) < c.rows.value(i) } else { c.nulls.value(i) > 0 }
                    })
                    .collect(),
            )
        }
        Predicate::And(ps) => ps.iter().fold(None, |all, p| match (all, may_pass(p, stats)) {
            (Some(a), Some(b)) => Some(a.iter().zip(b).map(|(a, b)| *a && b).collect()),
            (a, b) => a.or(b),
        }),
        Predicate::Or(ps) => {
            let mut any = Some(vec![false; stats.metadata.num_row_groups()]);
            for p in ps {
                any = either(any, may_pass(p, stats));
            }
            any
        }
        // What a negation rules out needs proof that every row passes its
        // operand, which minimum and maximum rarely give.
        Predicate::InList { negated: true, .. } | Predicate::Not(_) => None,
    }
}

fn either(a: Option<Vec<bool>>, b: Option<Vec<bool>>) -> Option<Vec<bool>> {
    Some(a?.iter().zip(b?).map(|(a, b)| *a || b).collect())
}

/// Per row group, whether a row with a value between its minimum and
/// maximum may compare `op` to `v` (a one-value array of their type).
fn compare(c: &Column, op: CompareOp, v: &ArrayRef) -> Option<Vec<bool>> {
    let v = Scalar::new(v.clone());
    let ok = match op {
        CompareOp::Eq => boolean::and_kleene(&cmp::lt_eq(&c.min, &v).ok()?, &cmp::gt_eq(&c.max, &v).ok()?).ok()?,
        CompareOp::NotEq => {
            let all_equal = boolean::and_kleene(&cmp::eq(&c.min, &v).ok()?, &cmp::eq(&c.max, &v).ok()?).ok()?;
            boolean::not(&all_equal).ok()?
        }
        CompareOp::Lt => cmp::lt(&c.min, &v).ok()?,
        CompareOp::LtEq => cmp::lt_eq(&c.min, &v).ok()?,
        CompareOp::Gt => cmp::gt(&c.max, &v).ok()?,
        CompareOp::GtEq => cmp::gt_eq(&c.max, &v).ok()?,
    };
    Some(kept(&ok))
}

/// True where `ok` is true or unknown.
fn kept(ok: &BooleanArray) -> Vec<bool> {
    (0..ok.len()).map(|i| !ok.is_valid(i) || ok.value(i)).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow::datatypes::Field;
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::file::properties::WriterProperties;

    use super::*;

    /// A file of four row groups of 10 rows: `n` runs 0..40, `s` is
    /// "g<group>", `x` is n / 2, and `o` is null in the first group only.
    fn file() -> (Bytes, SchemaRef) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("x", DataType::Float64, false),
            Field::new("o", DataType::Int64, true),
        ]));
        let props = WriterProperties::builder().set_max_row_group_row_count(Some(10)).build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, schema.clone(), Some(props)).unwrap();
        let n: Vec<i64> = (0..40).collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(Int64Array::from(n.clone())),
                Arc::new(StringArray::from_iter_values(n.iter().map(|i| format!("g{}", i / 10)))),
                Arc::new(Float64Array::from_iter_values(n.iter().map(|i| *i as f64 / 2.0))),
                Arc::new(Int64Array::from_iter(n.iter().map(|i| (*i >= 10).then_some(*i)))),
            ],
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        (Bytes::from(out), schema)
    }

    fn groups(p: Predicate) -> Vec<usize> {
        let (bytes, schema) = file();
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        assert_eq!(builder.metadata().num_row_groups(), 4);
        p.check(&schema).unwrap();
        StatisticsFilter { predicate: p, table: schema }.row_groups(builder.metadata(), builder.schema())
    }

    #[test]
    fn row_groups_whose_statistics_rule_the_filter_out_are_left_out() {
        assert_eq!(groups(Predicate::eq("n", 15i64)), vec![1]);
        assert_eq!(groups(Predicate::compare("n", CompareOp::Lt, 10i64)), vec![0]);
        assert_eq!(groups(Predicate::compare("n", CompareOp::LtEq, 10i64)), vec![0, 1]);
        assert_eq!(groups(Predicate::compare("n", CompareOp::Gt, 29i64)), vec![3]);
        assert_eq!(groups(Predicate::compare("n", CompareOp::GtEq, 29i64)), vec![2, 3]);
        assert_eq!(groups(Predicate::compare("n", CompareOp::NotEq, 3i64)), vec![0, 1, 2, 3]);
        assert_eq!(groups(Predicate::in_list("s", ["g0", "g3"])), vec![0, 3]);
        assert_eq!(groups(Predicate::eq("s", "g2").or(Predicate::eq("n", 5i64))), vec![0, 2]);
        assert_eq!(groups(Predicate::eq("s", "g2").and(Predicate::eq("n", 5i64))), Vec::<usize>::new());
        assert_eq!(groups(Predicate::is_null("o")), vec![0]);
        assert_eq!(groups(Predicate::is_null("o").not()), vec![0, 1, 2, 3], "NOT settles nothing");
        // Filters on what the statistics cannot settle keep every group.
        assert_eq!(groups(Predicate::compare("x", CompareOp::Gt, 100.0f64)), vec![0, 1, 2, 3]);
        assert_eq!(groups(Predicate::eq("s", "g2").and(Predicate::is_null("o").not())), vec![2]);
    }
}
