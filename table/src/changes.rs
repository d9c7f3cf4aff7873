//! The change feed ([`Table::changes`]): what each commit of a window
//! `(begin, end]` of completion times changed in what readers see, key by
//! key, with the row before and after (`docs/design.md`, "Change feed").
//!
//! Under event-time ordering and concurrent writers, what a commit changed
//! is not what it wrote: a late event that loses to a newer version changes
//! nothing, a late delete that wins retracts a row readers saw, and a
//! partial write changes one sequence group's columns of a row. So the feed
//! is not kept beside the data; it is worked out from the file slices, with
//! the same merge readers run:
//!
//! 1. The window's commits are the completed instants that change rows
//!    (delta commits, commits, replace commits; not compactions, which
//!    change no winner) whose completion time is in `(begin, end]`, taken
//!    in completion order: the order in which readers saw them.
//! 2. For each file group a commit wrote, the group is merged as a reader
//!    saw it just before that commit completed and just after
//!    ([`Timeline::completed_by`]: the instants completed by then), with
//!    the schema in force at the window's end.
//! 3. The two merged images are compared key by key on the table's columns
//!    (meta columns aside): a key only after is an insert, only before a
//!    delete, and in both with other values an update. Keys the commit
//!    wrote whose visible row stayed the same give nothing.
//!
//! The state before a group's first commit of the window is the group as
//! it was at `begin`, so a window needs the file slices readers saw at
//! `begin`: one that starts before what the latest clean retains is
//! refused, as time travel is. The cleaner's retention is the feed's.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, RecordBatch, StringArray, StructArray, new_null_array};
use arrow::compute::{SortColumn, interleave, lexsort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use arrow::row::{RowConverter, Rows, SortField};
use futures::{StreamExt, TryStreamExt};
use tributary_format::{META_FIELDS, PARTITION_PATH, RECORD_KEY, TableSchema};
use tributary_merge::{BaseRows, RowOrder, SliceFiles, SliceMerge, merge_slice};
use tributary_timeline::{
    Action, DataFile, FileSystemView, GroupId, Instant, InstantTime, PlannedGroups, TableConfig, Timeline,
    list_data_files, replaced_groups,
};

use crate::error::{Error, Result};
use crate::table::Table;

/// The change feed's column of the change's kind: `i`, `u` or `d`, as
/// Hudi's CDC records spell it.
pub const CHANGE_OP: &str = "op";
/// The column of the requested time of the commit that made the change:
/// the `_hoodie_commit_time` its rows carry, and Hudi's CDC `ts_ms`.
pub const CHANGE_COMMIT_TIME: &str = "commit_time";
/// The column of the completion time of that commit: the feed's order, and
/// where a consumer's next window begins.
pub const CHANGE_COMPLETION_TIME: &str = "completion_time";
/// The column of the changed row's partition path.
pub const CHANGE_PARTITION: &str = "partition_path";
/// The column of the changed row's record key.
pub const CHANGE_KEY: &str = "record_key";
/// The column of the row before the change (null for an insert): the
/// table's columns, meta columns aside.
pub const CHANGE_BEFORE: &str = "before";
/// The column of the row after the change (null for a delete).
pub const CHANGE_AFTER: &str = "after";

/// The kinds of change, as the feed's `op` column spells them.
const INSERT: &str = "i";
const UPDATE: &str = "u";
const DELETE: &str = "d";

/// The changes of a window ([`Table::changes`]).
#[derive(Debug, Clone)]
pub struct Changes {
    /// The window's exclusive start (a completion time).
    pub begin: InstantTime,
    /// The window's inclusive end: as asked, or for a window open at its
    /// end, the latest completion time of the timeline it was read at.
    /// A consumer's next window begins here.
    pub end: InstantTime,
    /// One row per change, ordered by completion time, then partition and
    /// record key; columns [`CHANGE_OP`], [`CHANGE_COMMIT_TIME`],
    /// [`CHANGE_COMPLETION_TIME`], [`CHANGE_PARTITION`], [`CHANGE_KEY`],
    /// [`CHANGE_BEFORE`] and [`CHANGE_AFTER`] (structs of the table's
    /// columns in the schema in force at `end`).
    pub rows: RecordBatch,
}

impl Table {
    /// The change feed of the commits that completed in `(begin, end]`
    /// (completion times; [`InstantTime::EARLIEST`] and
    /// [`InstantTime::LATEST`] leave an end open): for each commit, in
    /// completion order, each key whose visible row it changed, with the
    /// row before and after. A version that lost to a newer one changes
    /// nothing and is not in the feed; replaying the feed onto the table as
    /// it was at `begin` gives the table at `end`.
    ///
    /// A window starting before what the latest clean (or a pending one)
    /// retains is [`Error::InvalidInput`]: the slices it needs are gone.
    ///
    /// ```
    /// # async fn example(table: &tributary_table::Table) -> tributary_table::Result<()> {
    /// use tributary_table::InstantTime;
    ///
    /// // Everything so far, then only what completed since.
    /// let first = table.changes(&InstantTime::EARLIEST, &InstantTime::LATEST).await?;
    /// let next = table.changes(&first.end, &InstantTime::LATEST).await?;
    /// println!("{} changes, then {}", first.rows.num_rows(), next.rows.num_rows());
    /// # Ok(()) }
    /// ```
    pub async fn changes(&self, begin: &InstantTime, end: &InstantTime) -> Result<Changes> {
        self.changes_at(&self.timeline().await?, begin, end).await
    }

    /// [`Table::changes`] at `full`, a timeline of this table the caller
    /// loaded ([`Table::timeline`]).
    pub async fn changes_at(&self, full: &Timeline, begin: &InstantTime, end: &InstantTime) -> Result<Changes> {
        let w = self.changes_by_group(full, begin, end).await?;
        let rows = w.layout.ordered(w.parts.into_iter().map(|(_, rows)| rows).collect(), self.location())?;
        Ok(Changes { begin: begin.clone(), end: w.end, rows })
    }

    /// The changes of the window `(begin, end]` at `full` file group by
    /// file group ([`Table::changes_at`] orders them all together).
    pub(crate) async fn changes_by_group(
        &self,
        full: &Timeline,
        begin: &InstantTime,
        end: &InstantTime,
    ) -> Result<GroupChanges> {
        let loc = self.location();
        let what = || format!("the changes of {loc} in ({begin}, {end}]");
        if end < begin {
            return Err(Error::InvalidInput { what: what(), reason: "the window ends before it begins".into() });
        }
        let end = match end {
            e if *e == InstantTime::LATEST => {
                full.latest_completed().map_or_else(|| begin.clone(), |i| i.visible_at().clone()).max(begin.clone())
            }
            e => e.clone(),
        };
        let in_window = |i: &Instant| i.is_completed() && i.visible_at() > begin && i.visible_at() <= &end;
        if let Some(i) = full.completed().find(|i| in_window(i) && tributary_timeline::replaces_groups(i)) {
            return Err(Error::InvalidInput {
                what: what(),
                reason: format!(
                    "{} {} completed in the window and moved rows between file groups; the change feed does not \
                     cover windows holding insert overwrite or clustering",
                    i.action, i.requested
                ),
            });
        }
        let mut commits: Vec<&Instant> = full.completed().filter(|i| in_window(i) && changes_rows(i.action)).collect();
        commits.sort_by(|a, b| a.cmp_visibility(b));
        let (schema, config) = self.in_force(&full.completed_by(&end)).await?;
        let layout = Layout::of(&schema);
        if commits.is_empty() {
            // Nothing changed: rows kept at `begin` are the rows at `end`.
            if let Some(kept) = loc.recall::<Ending>(ENDING).filter(|k| k.end == *begin && k.schema == layout.out) {
                let images = kept.images.clone();
                loc.remember(ENDING, Arc::new(Ending { end: end.clone(), schema: layout.out.clone(), images }));
            }
            return Ok(GroupChanges { end, schema, layout, parts: Vec::new() });
        }
        let files = Files::list(self, full).await?;
        // After the listing: a clean that removed a slice the window needs
        // is on the timeline by then.
        self.check_not_cleaned(begin, what()).await?;
        // A consumer's next window begins where its last ended: the groups'
        // rows then are those that window ended with, if the schema is the
        // same. The table at a completion time never changes afterwards.
        let mut before: HashMap<GroupId, Arc<Image>> = loc
            .recall::<Ending>(ENDING)
            .filter(|kept| kept.end == *begin && kept.schema == layout.out)
            .map(|kept| kept.images.clone())
            .unwrap_or_default();
        let mut parts = Vec::new();
        let start = full.completed_by(begin);
        let mut changed: HashSet<GroupId> = HashSet::new();
        for commit in commits {
            let at = commit.visible_at();
            let timeline = full.completed_by(at);
            let groups = files.written_by(&config, commit);
            changed.extend(groups.iter().cloned());
            let ctx = Point { table: self, schema: &schema, config: &config, files: &files };
            let images: Vec<(GroupId, Arc<Image>, Arc<Image>)> = futures::stream::iter(groups)
                .map(|g| {
                    let prev = before.get(&g).cloned();
                    let (ctx, start, timeline) = (&ctx, &start, &timeline);
                    async move {
                        let prev = match prev {
                            Some(p) => p,
                            None => Arc::new(ctx.image(start, &g).await?),
                        };
                        let now = Arc::new(ctx.image(timeline, &g).await?);
                        Ok::<_, Error>((g, prev, now))
                    }
                })
                .buffer_unordered(crate::read::parallelism())
                .try_collect()
                .await?;
            for (g, prev, now) in images {
                if let Some(part) = layout.diff(&prev, &now, commit, loc)? {
                    parts.push((g.clone(), part));
                }
                before.insert(g, now);
            }
        }
        // The groups this window changed, as they were at its end.
        before.retain(|g, _| changed.contains(g));
        loc.remember(ENDING, Arc::new(Ending { end: end.clone(), schema: layout.out.clone(), images: before }));
        Ok(GroupChanges { end, schema, layout, parts })
    }
}

/// The changes of a window, file group by file group
/// ([`Table::changes_by_group`]).
pub(crate) struct GroupChanges {
    /// The window's end (as asked, or the latest completion time).
    pub(crate) end: InstantTime,
    /// The schema in force at the end, which the images hold.
    pub(crate) schema: TableSchema,
    layout: Layout,
    /// Each group's changes by one commit, in the feed's columns, in
    /// completion order of the commits.
    pub(crate) parts: Vec<(GroupId, RecordBatch)>,
}

/// Where the images a window ended with are kept (the table location's memo).
const ENDING: &str = "change feed: the groups a window changed, at its end";

/// The rows of the groups a window changed, at its end (a completion
/// time): the rows before of the next window that begins there.
struct Ending {
    end: InstantTime,
    /// The feed's schema, which holds the table schema the rows were
    /// merged in.
    schema: SchemaRef,
    images: HashMap<GroupId, Arc<Image>>,
}

/// Whether instants of `action` can change what readers see: writes, not
/// the table services that rewrite rows as they are (compaction, log
/// compaction) nor those that move them ([`Table::changes_at`] refuses
/// windows holding those).
pub(crate) fn changes_rows(action: Action) -> bool {
    matches!(action, Action::DeltaCommit | Action::Commit | Action::ReplaceCommit)
}

/// The table's data files, listed once for a whole window, by file group.
struct Files {
    groups: BTreeMap<GroupId, Vec<DataFile>>,
    /// The groups holding a file each instant wrote.
    written: HashMap<InstantTime, BTreeSet<GroupId>>,
    /// The groups replaced by completed replace commits, with the instant
    /// that replaced them.
    replaced: BTreeMap<GroupId, InstantTime>,
}

impl Files {
    async fn list(table: &Table, full: &Timeline) -> Result<Self> {
        let loc = table.location();
        let mut groups: BTreeMap<GroupId, Vec<DataFile>> = BTreeMap::new();
        let mut written: HashMap<InstantTime, BTreeSet<GroupId>> = HashMap::new();
        for f in list_data_files(loc).await? {
            // A change-log commit's change data changes no row.
            if f.name.ends_with(tributary_timeline::CHANGE_DATA_SUFFIX) {
                continue;
            }
            if let Some((group, instant)) = f.written() {
                written.entry(instant).or_default().insert(group.clone());
                groups.entry(group).or_default().push(f);
            }
        }
        let replaced = replaced_groups(loc, table.config(), full).await?.replaced;
        Ok(Self { groups, written, replaced })
    }

    /// The file groups `commit` may have changed: those holding a file its
    /// instant wrote. Before table version 8 a log file is named by its
    /// slice's base instant, not the commit's, so every group is taken.
    fn written_by(&self, config: &TableConfig, commit: &Instant) -> Vec<GroupId> {
        match config.version >= 8 {
            true => self.written.get(&commit.requested).into_iter().flatten().cloned().collect(),
            false => self.groups.keys().cloned().collect(),
        }
    }
}

/// What merging a file group at one point of a window needs.
struct Point<'a> {
    table: &'a Table,
    schema: &'a TableSchema,
    config: &'a TableConfig,
    files: &'a Files,
}

impl Point<'_> {
    /// The merged rows of group `g` as a reader saw them at `timeline`.
    async fn image(&self, timeline: &Timeline, g: &GroupId) -> Result<Image> {
        let loc = self.table.location();
        let files = self.files.groups.get(g).cloned().unwrap_or_default();
        let replaced = self
            .files
            .replaced
            .iter()
            .filter(|(_, by)| timeline.is_completed(by))
            .map(|(g, by)| (g.clone(), by.clone()))
            .collect();
        let planned = PlannedGroups { replaced, ..PlannedGroups::default() };
        let view = FileSystemView::build(timeline, files, &planned);
        let Some(slice) = view.latest_slices().into_iter().next() else { return Ok(Image::default()) };
        let base = slice.base.as_ref().map(|b| b.file.path.clone());
        let logs: Vec<_> = slice.logs.iter().map(|l| l.file.path.clone()).collect();
        let log_sizes: Vec<u64> = slice.logs.iter().map(|l| l.file.size).collect();
        let files = SliceFiles { base: base.as_ref(), logs: &logs, log_sizes: &log_sizes, base_rows: BaseRows::All };
        let ctx = SliceMerge { loc, schema: self.schema, config: self.config, timeline };
        let mut merged = merge_slice(&ctx, &files, RowOrder::Write, None).await?;
        let mut batches = Vec::new();
        while let Some(b) = merged.next_batch().await? {
            if b.num_rows() > 0 {
                batches.push(b);
            }
        }
        Image::of(batches, loc)
    }
}

/// A file group's merged rows at one point, indexed by record key.
#[derive(Default)]
struct Image {
    batches: Vec<RecordBatch>,
    /// The table's columns of each batch, in the row format, for comparing
    /// rows across images.
    rows: Vec<Rows>,
    /// Where each key's row is: batch, row.
    keys: HashMap<String, (usize, usize)>,
}

impl Image {
    fn of(batches: Vec<RecordBatch>, loc: &tributary_timeline::TableLocation) -> Result<Self> {
        let internal = |e: arrow::error::ArrowError| Error::Internal {
            table: loc.to_string(),
            what: "comparing the rows of a change".into(),
            reason: e.to_string(),
        };
        let mut keys = HashMap::new();
        let mut rows = Vec::with_capacity(batches.len());
        if let Some(first) = batches.first() {
            let fields: Vec<SortField> = first.schema().fields()[META_FIELDS.len()..]
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect();
            let converter = RowConverter::new(fields).map_err(internal)?;
            for (n, b) in batches.iter().enumerate() {
                rows.push(converter.convert_columns(&b.columns()[META_FIELDS.len()..]).map_err(internal)?);
                let k = key_column(b, loc)?;
                for r in 0..b.num_rows() {
                    keys.insert(k.value(r).to_string(), (n, r));
                }
            }
        }
        Ok(Self { batches, rows, keys })
    }
}

fn key_column<'a>(b: &'a RecordBatch, loc: &tributary_timeline::TableLocation) -> Result<&'a StringArray> {
    b.column(RECORD_KEY).as_any().downcast_ref::<StringArray>().ok_or_else(|| Error::Internal {
        table: loc.to_string(),
        what: "reading the record keys of merged rows".into(),
        reason: format!("`{}` is {}", META_FIELDS[RECORD_KEY], b.column(RECORD_KEY).data_type()),
    })
}

/// One change of a file group: its kind, and where its rows before and
/// after are in their images (batch, row).
struct Found {
    op: &'static str,
    before: Option<(usize, usize)>,
    after: Option<(usize, usize)>,
}

/// The shape of the feed's rows for one table schema.
struct Layout {
    /// The struct type of the before and after images.
    image: DataType,
    image_fields: Fields,
    out: SchemaRef,
}

impl Layout {
    fn of(schema: &TableSchema) -> Self {
        let image_fields: Fields =
            schema.arrow().fields().iter().map(|f| Arc::new(f.as_ref().clone().with_nullable(true))).collect();
        let image = DataType::Struct(image_fields.clone());
        let text = |name: &str| Field::new(name, DataType::Utf8, false);
        let out = Arc::new(Schema::new(vec![
            text(CHANGE_OP),
            text(CHANGE_COMMIT_TIME),
            text(CHANGE_COMPLETION_TIME),
            text(CHANGE_PARTITION),
            text(CHANGE_KEY),
            Field::new(CHANGE_BEFORE, image.clone(), true),
            Field::new(CHANGE_AFTER, image.clone(), true),
        ]));
        Self { image, image_fields, out }
    }

    /// The changes `commit` made to one file group, from its rows before
    /// and after; `None` when it changed nothing there.
    fn diff(
        &self,
        before: &Image,
        after: &Image,
        commit: &Instant,
        loc: &tributary_timeline::TableLocation,
    ) -> Result<Option<RecordBatch>> {
        let mut found: Vec<Found> = Vec::new();
        let mut seen: HashSet<&str> = HashSet::new();
        for (n, b) in after.batches.iter().enumerate() {
            let keys = key_column(b, loc)?;
            for r in 0..b.num_rows() {
                let key = keys.value(r);
                seen.insert(key);
                match before.keys.get(key) {
                    None => found.push(Found { op: INSERT, before: None, after: Some((n, r)) }),
                    Some(&old) if before.rows[old.0].row(old.1) != after.rows[n].row(r) => {
                        found.push(Found { op: UPDATE, before: Some(old), after: Some((n, r)) })
                    }
                    Some(_) => {}
                }
            }
        }
        for (key, &old) in &before.keys {
            if !seen.contains(key.as_str()) {
                found.push(Found { op: DELETE, before: Some(old), after: None });
            }
        }
        if found.is_empty() {
            return Ok(None);
        }
        let internal = |e: arrow::error::ArrowError| Error::Internal {
            table: loc.to_string(),
            what: format!("building the changes of {}", commit.requested),
            reason: e.to_string(),
        };
        // Each image's batches as structs of the table's columns, and one
        // null row for the side a change has none of.
        let structs = |img: &Image| -> Result<Vec<ArrayRef>> {
            let mut arrays = Vec::with_capacity(img.batches.len() + 1);
            for b in &img.batches {
                let columns = b.columns()[META_FIELDS.len()..].to_vec();
                let s = StructArray::try_new(self.image_fields.clone(), columns, None).map_err(internal)?;
                arrays.push(Arc::new(s) as ArrayRef);
            }
            arrays.push(new_null_array(&self.image, 1));
            Ok(arrays)
        };
        let pick = |img: &Image, at: &dyn Fn(&Found) -> Option<(usize, usize)>| -> Result<ArrayRef> {
            let arrays = structs(img)?;
            let null = (arrays.len() - 1, 0);
            let at: Vec<(usize, usize)> = found.iter().map(|c| at(c).unwrap_or(null)).collect();
            let refs: Vec<&dyn Array> = arrays.iter().map(|a| a.as_ref()).collect();
            interleave(&refs, &at).map_err(internal)
        };
        // The meta column `column` of a change's row (after, or before for a delete).
        let meta = |c: &Found, column: usize| -> String {
            let (img, (n, r)) = match (c.after, c.before) {
                (Some(p), _) => (after, p),
                (None, Some(p)) => (before, p),
                (None, None) => return String::new(),
            };
            let a = img.batches[n].column(column);
            a.as_any().downcast_ref::<StringArray>().map_or_else(String::new, |s| s.value(r).to_string())
        };
        let texts =
            |f: &dyn Fn(&Found) -> String| Arc::new(StringArray::from_iter_values(found.iter().map(f))) as ArrayRef;
        let columns = vec![
            texts(&|c| c.op.to_string()),
            texts(&|_| commit.requested.to_string()),
            texts(&|_| commit.visible_at().to_string()),
            texts(&|c| meta(c, PARTITION_PATH)),
            texts(&|c| meta(c, RECORD_KEY)),
            pick(before, &|c| c.before)?,
            pick(after, &|c| c.after)?,
        ];
        RecordBatch::try_new(self.out.clone(), columns).map(Some).map_err(internal)
    }

    /// The changes of a window in one batch, by completion time, then
    /// partition and record key.
    fn ordered(&self, parts: Vec<RecordBatch>, loc: &tributary_timeline::TableLocation) -> Result<RecordBatch> {
        let internal = |e: arrow::error::ArrowError| Error::Internal {
            table: loc.to_string(),
            what: "ordering a window's changes".into(),
            reason: e.to_string(),
        };
        let all = arrow::compute::concat_batches(&self.out, &parts).map_err(internal)?;
        if all.num_rows() < 2 {
            return Ok(all);
        }
        let by = |name: &str| SortColumn {
            values: all.column_by_name(name).cloned().unwrap_or_else(|| all.column(0).clone()),
            options: None,
        };
        let order = lexsort_to_indices(&[by(CHANGE_COMPLETION_TIME), by(CHANGE_PARTITION), by(CHANGE_KEY)], None)
            .map_err(internal)?;
        take_record_batch(&all, &order).map_err(internal)
    }
}
