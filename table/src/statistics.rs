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
//! Within the row groups kept, the page indexes (each page's minimum,
//! maximum and null count, which Parquet writers keep beside the footer)
//! rule out pages the same way: each column's pages split the rows
//! differently, so a comparison selects the rows of its column's pages that
//! may pass, `AND` intersects the selections and `OR` unites them. The
//! pages of the columns read that hold no selected row are not fetched.
//!
//! Only slices without logs read their base files so (`scan.rs`): a log
//! may hold a newer version of a row the statistics rule out.

use arrow::array::{Array, ArrayRef, BooleanArray, Scalar, UInt64Array};
use arrow::compute::kernels::{boolean, cmp};
use arrow::datatypes::{DataType, Schema, SchemaRef};
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};
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
        let stats = Stats { metadata, file: schema, table: &self.table, pages: None };
        let keep = may_pass(&self.predicate, &stats);
        (0..metadata.num_row_groups()).filter(|&i| keep.as_ref().is_none_or(|k| k[i])).collect()
    }

    fn rows(&self, metadata: &ParquetMetaData, schema: &Schema, groups: &[usize]) -> Option<RowSelection> {
        let mut selectors = Vec::new();
        for &group in groups {
            let rows = usize::try_from(metadata.row_group(group).num_rows()).ok()?;
            let stats = Stats { metadata, file: schema, table: &self.table, pages: Some(group) };
            match page_rows(&self.predicate, &stats) {
                Some(selection) => selectors.extend(selection.iter().copied()),
                None => selectors.push(RowSelector::select(rows)),
            }
        }
        let selection = RowSelection::from(selectors);
        (selection.skipped_row_count() > 0).then_some(selection)
    }
}

/// The row groups of one file, or the pages of one of its row groups, and
/// the two schemas its columns are matched in.
struct Stats<'a> {
    metadata: &'a ParquetMetaData,
    file: &'a Schema,
    table: &'a Schema,
    /// The row group whose pages are the units, else the row groups are.
    pages: Option<usize>,
}

/// One column's statistics over a file's row groups, or over its pages in
/// one row group; nulls where unknown.
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
        let Some(group) = self.pages else {
            return Some(Column {
                min: c.row_group_mins(groups).ok()?,
                max: c.row_group_maxes(groups).ok()?,
                nulls: c.row_group_null_counts(groups).ok()?,
                rows: c.row_group_row_counts(groups).ok()??,
            });
        };
        let (index, places) = (self.metadata.column_index()?, self.metadata.offset_index()?);
        let column = Some(Column {
            min: c.data_page_mins(index, places, [&group]).ok()?,
            max: c.data_page_maxes(index, places, [&group]).ok()?,
            nulls: c.data_page_null_counts(index, places, [&group]).ok()?,
            rows: c.data_page_row_counts(places, groups, [&group]).ok()??,
        });
        // Every page accounted for, or the column is not used.
        column.filter(|c| {
            let n = c.rows.len();
            c.min.len() == n && c.max.len() == n && c.nulls.len() == n && c.rows.null_count() == 0
        })
    }
}

/// Of the rows of the row group whose pages `stats` holds, those that may
/// pass `p` (`None`: every one may).
fn page_rows(p: &Predicate, stats: &Stats) -> Option<RowSelection> {
    match p {
        Predicate::And(ps) => ps.iter().fold(None, |all, p| match (all, page_rows(p, stats)) {
            (Some(a), Some(b)) => Some(a.intersection(&b)),
            (a, b) => a.or(b),
        }),
        Predicate::Or(ps) => {
            let mut any: Option<RowSelection> = None;
            for p in ps {
                let rows = page_rows(p, stats)?;
                any = Some(match any {
                    Some(a) => a.union(&rows),
                    None => rows,
                });
            }
            any
        }
        leaf => {
            let c = stats.column(leaf_column(leaf)?)?;
            let keep = leaf_may_pass(leaf, &c)?;
            let selectors = c.rows.values().iter().zip(keep).map(|(&rows, keep)| {
                let rows = rows as usize;
                if keep { RowSelector::select(rows) } else { RowSelector::skip(rows) }
            });
            Some(RowSelection::from(selectors.collect::<Vec<_>>()))
        }
    }
}

/// The column a comparison, list or null test is on.
fn leaf_column(p: &Predicate) -> Option<&str> {
    match p {
        Predicate::Compare { column, .. } | Predicate::InList { column, .. } | Predicate::IsNull { column, .. } => {
            Some(column)
        }
        Predicate::And(_) | Predicate::Or(_) | Predicate::Not(_) => None,
    }
}

/// Per unit of `c` (row group or page), whether a row of it may pass the
/// comparison, list or null test `p` on `c`'s column (`None`: every one
/// may).
fn leaf_may_pass(p: &Predicate, c: &Column) -> Option<Vec<bool>> {
    match p {
        Predicate::Compare { op, value, .. } => {
            let v = value.cast(c.min.data_type()).ok()?;
            compare(c, *op, &v)
        }
        Predicate::InList { values, negated: false, .. } => {
            let mut any: Option<Vec<bool>> = Some(vec![false; c.rows.len()]);
            for v in values {
                let v = v.cast(c.min.data_type()).ok()?;
                any = either(any, compare(c, CompareOp::Eq, &v));
            }
            any
        }
        Predicate::IsNull { negated, .. } => Some(
            (0..c.rows.len())
                .map(|i| {
                    !c.nulls.is_valid(i)
                        || if *negated { c.nulls.value(i) < c.rows.value(i) } else { c.nulls.value(i) > 0 }
                })
                .collect(),
        ),
        // What a negation rules out needs proof that every row passes its
        // operand, which minimum and maximum rarely give.
        Predicate::InList { negated: true, .. } | Predicate::Not(_) | Predicate::And(_) | Predicate::Or(_) => None,
    }
}

/// Per row group, whether a row of it may pass `p` (`None`: every one
/// may).
fn may_pass(p: &Predicate, stats: &Stats) -> Option<Vec<bool>> {
    match p {
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
        leaf => leaf_may_pass(leaf, &stats.column(leaf_column(leaf)?)?),
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
        file_of(WriterProperties::builder().set_max_row_group_row_count(Some(10)).build())
    }

    /// The rows of [`file`], in one row group of pages of 5 rows.
    fn paged_file() -> (Bytes, SchemaRef) {
        let props = WriterProperties::builder().set_data_page_row_count_limit(5).set_write_batch_size(5).build();
        file_of(props)
    }

    fn file_of(props: WriterProperties) -> (Bytes, SchemaRef) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, false),
            Field::new("x", DataType::Float64, false),
            Field::new("o", DataType::Int64, true),
        ]));
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

    /// The selectors of the rows a read of [`paged_file`] takes for `p`, as
    /// (rows, selected); checked against what a read with them returns.
    fn pages(p: Predicate) -> Vec<(usize, bool)> {
        use parquet::arrow::arrow_reader::ArrowReaderOptions;
        use parquet::file::metadata::PageIndexPolicy;
        let (bytes, schema) = paged_file();
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(bytes, options).unwrap();
        assert_eq!((builder.metadata().num_row_groups(), builder.metadata().row_group(0).num_rows()), (1, 40));
        p.check(&schema).unwrap();
        let filter = StatisticsFilter { predicate: p.clone(), table: schema };
        let Some(rows) = filter.rows(builder.metadata(), builder.schema(), &[0]) else { return vec![(40, true)] };
        let selectors: Vec<(usize, bool)> = rows.iter().map(|s| (s.row_count, !s.skip)).collect();
        // The rows read are the ones selected, and every row that passes
        // the filter is among them.
        let read: Vec<RecordBatch> =
            builder.with_row_selection(rows.clone()).build().unwrap().map(Result::unwrap).collect();
        let read = arrow::compute::concat_batches(&read[0].schema(), &read).unwrap();
        assert_eq!(read.num_rows(), rows.row_count());
        let (all, _) = paged_file();
        let all: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::try_new(all).unwrap().build().unwrap().map(Result::unwrap).collect();
        let passing = |b: &RecordBatch| {
            let keep = p.filter(b).unwrap();
            keep.column(0).as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec()
        };
        let read_passing = passing(&read);
        for n in all.iter().flat_map(passing) {
            assert!(read_passing.contains(&n), "row n = {n} passes {p} but was not read");
        }
        selectors
    }

    #[test]
    fn pages_whose_statistics_rule_the_filter_out_are_left_out() {
        let (skip, take) = (false, true);
        assert_eq!(pages(Predicate::eq("n", 12i64)), vec![(10, skip), (5, take), (25, skip)]);
        assert_eq!(pages(Predicate::compare("n", CompareOp::Lt, 7i64)), vec![(10, take), (30, skip)]);
        assert_eq!(
            pages(Predicate::eq("n", 12i64).or(Predicate::compare("n", CompareOp::GtEq, 35i64))),
            vec![(10, skip), (5, take), (20, skip), (5, take)]
        );
        assert_eq!(
            pages(Predicate::compare("n", CompareOp::Lt, 20i64).and(Predicate::eq("s", "g1"))),
            vec![(10, skip), (10, take), (20, skip)]
        );
        assert_eq!(pages(Predicate::in_list("s", ["g0", "g3"])), vec![(10, take), (20, skip), (10, take)]);
        assert_eq!(pages(Predicate::is_null("o")), vec![(10, take), (30, skip)]);
        // What the page statistics cannot settle keeps every row.
        assert_eq!(pages(Predicate::is_null("o").not()), vec![(40, take)]);
        assert_eq!(pages(Predicate::compare("x", CompareOp::Gt, 100.0f64)), vec![(40, take)]);
        assert_eq!(pages(Predicate::eq("n", 12i64).or(Predicate::is_null("o").not())), vec![(40, take)]);
        assert_eq!(
            pages(Predicate::eq("n", 12i64).and(Predicate::is_null("o").not())),
            pages(Predicate::eq("n", 12i64))
        );
    }
}
