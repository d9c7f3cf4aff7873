//! The scale benchmark of `--bench ingest` (`TRIBUTARY_BENCH_ONLY=scale`):
//! the same pipeline at several sizes, to show what holds and where it
//! bends as a table grows.
//!
//! At each size N (records; `TRIBUTARY_BENCH_SCALES`, default 1 M, 10 M
//! and 100 M), into a fresh unpartitioned table of one bucket per
//! [`ROWS_PER_BUCKET`] records (so a file group holds about as many rows
//! at every size), with keys drawn uniformly from N/2:
//!
//! 1. **ingest**: N records in [`INGEST_COMMITS`] commits, Arrow in; a
//!    compaction and a clean (keeping the last commit) after every
//!    [`INGEST_COMMITS_PER_COMPACTION`] commits, as `serve` runs them
//!    behind the writers (and as the disk needs at 100 M records);
//! 2. **upserts**: [`UPSERT_COMMITS`] commits of N/100 records each (1 M
//!    at N = 100 M), a compaction and clean after the first half;
//! 3. **snapshot read** of the table as the upserts left it (base files
//!    and the logs of the last half), every row, streamed
//!    ([`tributary::Table::scan`]);
//! 4. **scan with a filter**: `fare > 247.5` (about 1 % of the rows), three
//!    columns;
//! 5. **compaction** of what is left.
//!
//! Each step runs in a child process of its own, which generates its input
//! untimed and reports its CPU time and peak resident memory (`VmHWM`).
//! The table prints, per size and step, records per second and per
//! CPU-second, and each rate against the smallest size's.

use super::*;

/// The sizes the benchmark runs at, unless `TRIBUTARY_BENCH_SCALES` says.
const DEFAULT_SCALES: [usize; 3] = [1_000_000, 10_000_000, 100_000_000];
const SCALES_ENV: &str = "TRIBUTARY_BENCH_SCALES";
/// Records per bucket: a table of N records has N / this many buckets.
const ROWS_PER_BUCKET: usize = 250_000;
const INGEST_COMMITS: usize = 10;
const INGEST_COMMITS_PER_COMPACTION: usize = 2;
const UPSERT_COMMITS: usize = 40;
/// The filter of the scan step: `fare` is uniform in [2.5, 250).
const SCAN_FARE_ABOVE: f64 = 247.5;

/// What a `scale-write` child writes: `COMMITS` commits of `COMMIT_ROWS`
/// records into a table of N records (`TRIBUTARY_BENCH_ROWS`), the rows
/// after the first `OFFSET` written (their event times follow those).
const COMMITS_ENV: &str = "TRIBUTARY_BENCH_COMMITS";
const COMMIT_ROWS_ENV: &str = "TRIBUTARY_BENCH_COMMIT_ROWS";
const OFFSET_ENV: &str = "TRIBUTARY_BENCH_OFFSET";

fn required(name: &str) -> usize {
    env_usize(name).unwrap_or_else(|| panic!("{name} for a scale case"))
}

fn buckets(rows: usize) -> u32 {
    (rows / ROWS_PER_BUCKET).max(1) as u32
}

/// CPU-seconds between `before` and `after`.
fn spent(before: Usage, after: Usage) -> f64 {
    (after.cpu - before.cpu).as_secs_f64()
}

/// The system (kernel) part of [`spent`].
fn spent_sys(before: Usage, after: Usage) -> f64 {
    (after.sys - before.sys).as_secs_f64()
}

/// Writes `COMMITS` commits of `COMMIT_ROWS` records (created with its
/// buckets if the table is new). Each commit's rows are generated before
/// its clock starts.
pub(super) fn case_write(dir: &Path, ticks: u64) -> BenchResult<()> {
    let (rows, commits, per_commit, offset) =
        (total_rows(), required(COMMITS_ENV), required(COMMIT_ROWS_ENV), required(OFFSET_ENV));
    let rt = runtime();
    let table = if dir.join(".hoodie").exists() {
        rt.block_on(open_table(dir))?
    } else {
        rt.block_on(create_table_with(dir, buckets(rows)))
    };
    let client = rt.block_on(table.write_client(write_settings(2)))?;
    let key_space = (rows / 2).max(1);
    let mut generator = Generator::new(client.schema().arrow(), key_space, offset as u64);
    generator.rows = offset;
    let (mut secs, mut cpu, mut sys, mut records) = (0.0, 0.0, 0.0, 0u64);
    for _ in 0..commits {
        let mut batches = Vec::new();
        let mut left = per_commit;
        while left > 0 {
            let n = left.min(BATCH_ROWS);
            batches.push(generator.batch(n, |rng| rng.random_range(0..key_space)));
            left -= n;
        }
        let before = usage(ticks)?;
        let started = Instant::now();
        let summary = rt.block_on(async {
            let mut commit = client.start_commit().await?;
            for b in &batches {
                commit.write_batch(b).await?;
            }
            commit.commit().await
        })?;
        secs += started.elapsed().as_secs_f64();
        let after = usage(ticks)?;
        cpu += spent(before, after);
        sys += spent_sys(before, after);
        records += summary.records();
    }
    report(&[
        ("rows", (commits * per_commit).to_string()),
        ("records", records.to_string()),
        ("secs", format!("{secs:.6}")),
        ("cpu", format!("{cpu:.3}")),
        ("sys", format!("{sys:.3}")),
        ("peak_kib", usage(ticks)?.peak_kib.to_string()),
        ("disk", disk_bytes(dir).to_string()),
    ]);
    Ok(())
}

/// One compaction (the compactor's defaults: 256 MiB, two groups at once),
/// then a clean keeping the last commit, each timed.
pub(super) fn case_compact(dir: &Path, ticks: u64) -> BenchResult<()> {
    let rt = runtime();
    let table = rt.block_on(open_table(dir))?;
    let settings = CompactorSettings { parallelism: COMPACT_PARALLELISM, ..Default::default() };
    let compactor = rt.block_on(table.compactor(settings))?;
    let before = usage(ticks)?;
    let started = Instant::now();
    let done = rt.block_on(compactor.run_once())?;
    let secs = started.elapsed().as_secs_f64();
    let compacted = usage(ticks)?;
    let clean_started = Instant::now();
    let cleaned = rt.block_on(table.clean(1))?;
    let clean_secs = clean_started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    let sum = |f: fn(&tributary_compaction::CompactionSummary) -> u64| done.iter().map(f).sum::<u64>();
    report(&[
        ("groups", sum(|c| c.groups as u64).to_string()),
        ("records", sum(|c| c.records).to_string()),
        ("bytes_read", sum(|c| c.bytes_read).to_string()),
        ("bytes_written", sum(|c| c.bytes_written).to_string()),
        ("secs", format!("{secs:.6}")),
        ("cpu", format!("{:.3}", spent(before, compacted))),
        ("sys", format!("{:.3}", spent_sys(before, compacted))),
        ("clean_secs", format!("{clean_secs:.6}")),
        ("clean_cpu", format!("{:.3}", spent(compacted, after))),
        ("clean_sys", format!("{:.3}", spent_sys(compacted, after))),
        ("deleted", cleaned.map_or(0, |c| c.deleted_files.len()).to_string()),
        ("peak_kib", after.peak_kib.to_string()),
        ("disk", disk_bytes(dir).to_string()),
    ]);
    Ok(())
}

/// A snapshot read of every row, or (`filtered`) the scan with the filter,
/// streamed and counted.
pub(super) fn case_read(dir: &Path, ticks: u64, filtered: bool) -> BenchResult<()> {
    use futures::TryStreamExt;
    let rt = runtime();
    let table = rt.block_on(open_table(dir))?;
    let before = usage(ticks)?;
    let started = Instant::now();
    let rows = rt.block_on(async {
        let mut scan = table.scan();
        if filtered {
            let fare = tributary::Predicate::compare("fare", tributary::CompareOp::Gt, SCAN_FARE_ABOVE);
            scan = scan.filter(fare).columns(["key", "ts", "fare"]);
        }
        let mut stream = scan.stream().await?;
        let mut rows = 0usize;
        while let Some(b) = stream.try_next().await? {
            rows += b.num_rows();
        }
        Ok::<_, tributary::Error>(rows)
    })?;
    let secs = started.elapsed().as_secs_f64();
    let after = usage(ticks)?;
    report(&[
        ("rows", rows.to_string()),
        ("secs", format!("{secs:.6}")),
        ("cpu", format!("{:.3}", spent(before, after))),
        ("sys", format!("{:.3}", spent_sys(before, after))),
        ("peak_kib", after.peak_kib.to_string()),
    ]);
    Ok(())
}

/// One step's figures at one size: what it counts, and the sums over its
/// children.
#[derive(Debug, Default, Clone)]
struct Step {
    /// Records (written, compacted or read).
    records: f64,
    secs: f64,
    cpu: f64,
    /// The kernel's part of `cpu`.
    sys: f64,
    peak_kib: f64,
    /// What else the step says.
    note: String,
}

impl Step {
    fn add(&mut self, records: f64, f: &Figures) {
        self.records += records;
        self.secs += get(f, "secs");
        self.cpu += get(f, "cpu");
        self.sys += get(f, "sys");
        self.peak_kib = self.peak_kib.max(get(f, "peak_kib"));
    }

    fn per_cpu(&self) -> f64 {
        self.records / self.cpu
    }
}

/// The steps at one size, in order, or where it failed.
struct Run {
    rows: usize,
    steps: Vec<(&'static str, Step)>,
    failed: Option<String>,
    disk: f64,
}

fn sizes() -> Vec<usize> {
    match std::env::var(SCALES_ENV) {
        Ok(v) => v
            .split(',')
            .map(|s| s.trim().replace('_', "").parse().unwrap_or_else(|e| panic!("{SCALES_ENV}={v}: {e}")))
            .collect(),
        Err(_) => DEFAULT_SCALES.to_vec(),
    }
}

/// Runs the pipeline at `rows` records in `dir`.
fn run_size(rows: usize, dir: &Path) -> Run {
    let mut run = Run { rows, steps: Vec::new(), failed: None, disk: 0.0 };
    if let Err(e) = run_steps(rows, dir, &mut run) {
        run.failed = Some(e);
    }
    run
}

/// The steps of one size, as they run.
struct Steps<'a> {
    rows: usize,
    dir: &'a Path,
    /// Records written so far.
    written: usize,
    /// Log records written since the last compaction: what it compacts.
    pending_logs: f64,
    compaction: Step,
    clean: Step,
    /// Rows the last compaction wrote.
    last_base_rows: f64,
    disk: f64,
}

impl Steps<'_> {
    /// A `scale-write` child: `commits` commits of `per_commit` records.
    fn write(&mut self, step: &mut Step, commits: usize, per_commit: usize) -> Result<(), String> {
        let env = [
            (ROWS_ENV, self.rows.to_string()),
            (COMMITS_ENV, commits.to_string()),
            (COMMIT_ROWS_ENV, per_commit.to_string()),
            (OFFSET_ENV, self.written.to_string()),
        ];
        let f = run_child_with("scale-write", self.dir, &env)?;
        self.written += commits * per_commit;
        step.add(get(&f, "rows"), &f);
        self.pending_logs += get(&f, "records");
        Ok(())
    }

    /// A `scale-compact` child: a compaction and a clean.
    fn compact(&mut self) -> Result<(), String> {
        let f = run_child_with("scale-compact", self.dir, &[(ROWS_ENV, self.rows.to_string())])?;
        self.compaction.add(self.pending_logs, &f);
        self.pending_logs = 0.0;
        self.last_base_rows = get(&f, "records");
        self.clean.records += get(&f, "deleted");
        self.clean.secs += get(&f, "clean_secs");
        self.clean.cpu += get(&f, "clean_cpu");
        self.clean.sys += get(&f, "clean_sys");
        self.disk = self.disk.max(get(&f, "disk"));
        Ok(())
    }
}

fn run_steps(rows: usize, dir: &Path, run: &mut Run) -> Result<(), String> {
    let mut at = Steps {
        rows,
        dir,
        written: 0,
        pending_logs: 0.0,
        compaction: Step::default(),
        clean: Step::default(),
        last_base_rows: 0.0,
        disk: 0.0,
    };
    let mut ingest = Step::default();
    let per_ingest_commit = rows / INGEST_COMMITS;
    for _ in 0..INGEST_COMMITS / INGEST_COMMITS_PER_COMPACTION {
        println!("  {rows}: ingest, {INGEST_COMMITS_PER_COMPACTION} commits of {per_ingest_commit}, compaction ...");
        at.write(&mut ingest, INGEST_COMMITS_PER_COMPACTION, per_ingest_commit)?;
        at.compact()?;
    }
    run.steps.push(("ingest", ingest));
    let mut upserts = Step::default();
    let per_upsert = rows / 100;
    println!("  {rows}: {} upsert commits of {per_upsert}, compaction ...", UPSERT_COMMITS / 2);
    at.write(&mut upserts, UPSERT_COMMITS / 2, per_upsert)?;
    at.compact()?;
    println!("  {rows}: {} upsert commits of {per_upsert} ...", UPSERT_COMMITS / 2);
    at.write(&mut upserts, UPSERT_COMMITS / 2, per_upsert)?;
    run.steps.push(("upserts", upserts));
    let mut read_rows = 0.0;
    for (name, case) in [("snapshot read", "scale-read"), ("scan, fare > 247.5", "scale-scan")] {
        println!("  {rows}: {name} ...");
        let f = run_child_with(case, dir, &[])?;
        let mut step = Step::default();
        if case == "scale-read" {
            read_rows = get(&f, "rows");
        } else {
            step.note = format!("counted = the table's rows; {} returned", get(&f, "rows"));
        }
        step.add(read_rows, &f);
        run.steps.push((name, step));
    }
    println!("  {rows}: compaction of the last upserts ...");
    at.compact()?;
    // Keys are uniform over the buckets, so the last compaction rewrote
    // every file group: its rows are the table's.
    if at.last_base_rows != read_rows {
        let note = format!("MISMATCH: the read returned {read_rows} rows, the compaction wrote {}", at.last_base_rows);
        if let Some((_, read)) = run.steps.iter_mut().find(|(n, _)| *n == "snapshot read") {
            read.note = note;
        }
    }
    at.compaction.note = format!("counted = log records compacted; last wrote {} rows", at.last_base_rows);
    run.steps.push(("compaction", at.compaction));
    at.clean.note = "counted = files deleted; in the compaction's processes".into();
    run.steps.push(("clean", at.clean));
    run.disk = at.disk;
    Ok(())
}

/// Runs the scale benchmark and prints its table.
pub(super) fn parent() {
    let sizes = sizes();
    let root = tempfile::Builder::new().prefix("tributary-scale-bench-").tempdir().expect("temp dir");
    println!(
        "scale bench: {sizes:?} records; one bucket per {ROWS_PER_BUCKET} records; keys from N/2; in {}",
        root.path().display()
    );
    let mut runs = Vec::new();
    for &rows in &sizes {
        let dir = root.path().join(rows.to_string());
        runs.push(run_size(rows, &dir));
        // Each size's table goes before the next is written.
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!();
    println!("== scale: the pipeline at each size (rates per wall second and per CPU-second) ==");
    println!(
        "{:>11} {:<20} {:>12} {:>9} {:>12} {:>8} {:>6} {:>12} {:>9} {:>9}  notes",
        "records", "step", "counted", "secs", "per s", "CPU-s", "sys %", "per CPU-s", "vs first", "peak MiB"
    );
    let first: Option<&Run> = runs.first();
    for run in &runs {
        if let Some(e) = &run.failed {
            println!("{:>11} FAILED: {e}", run.rows);
        }
        for (name, step) in &run.steps {
            let base = first.and_then(|f| f.steps.iter().find(|(n, _)| n == name)).map(|(_, s)| s.per_cpu());
            println!(
                "{:>11} {:<20} {:>12.0} {:>9.2} {:>12.0} {:>8.2} {:>6.0} {:>12.0} {:>9} {:>9}  {}",
                run.rows,
                name,
                step.records,
                step.secs,
                step.records / step.secs,
                step.cpu,
                100.0 * step.sys / step.cpu,
                step.per_cpu(),
                base.map_or("-".into(), |b| format!("{:.2}", step.per_cpu() / b)),
                if step.peak_kib > 0.0 { format!("{:.0}", mib(step.peak_kib)) } else { "-".into() },
                step.note,
            );
        }
        println!("{:>11} largest size on disk after a compaction and clean: {:.2} GB", run.rows, run.disk / 1e9);
    }
}
