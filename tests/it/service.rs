//! The table services as one loop (`serve`, `tributary serve`): while a
//! writer commits, it compacts, cleans and archives on its schedules, the
//! table reads the model throughout, and a stop (the shutdown future, or
//! SIGTERM for the binary) ends it after the running job.

use std::time::Duration;

use tributary::{ArchiveSettings, Query, ReadOptions, ServiceSchedule, serve};
use tributary_compaction::CompactorSettings;
use tributary_writer::WriteSettings;

use crate::support::{Place, fares_options, fares_rows, hybrid, init_trips, oslo_batch, tributary_ok};

/// Archiving bounds tight enough to run within a test.
fn tight() -> ArchiveSettings {
    ArchiveSettings { keep_min_commits: 2, keep_max_commits: 4, cleaner_commits_retained: 0, ..Default::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_compacts_cleans_and_archives_while_a_writer_commits() {
    let Some(place) = Place::new() else { return };
    let o = fares_options();
    let table = place.table("t");
    let t = table.builder().with_settings(hybrid()).create(o).await.unwrap();
    let schedule = ServiceSchedule {
        compact_every: Duration::from_millis(20),
        compactor: CompactorSettings::default(),
        clean_every: Some(Duration::from_millis(100)),
        retain_commits: 2,
        archive_every: Some(Duration::from_millis(100)),
        archive: tight(),
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let service_table = table.builder().with_settings(hybrid()).open().await.unwrap();
    let service = tokio::spawn(async move {
        let mut events = Vec::new();
        let report = serve(
            &service_table,
            &schedule,
            async {
                let _ = stopped.await;
            },
            |e| events.push(format!("{e:?}")),
        )
        .await
        .unwrap();
        (report, events)
    });

    let client = t.write_client(WriteSettings::default()).await.unwrap();
    let mut model = std::collections::BTreeMap::new();
    for n in 0..60i64 {
        let key = format!("k{}", n % 5);
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&oslo_batch(&[(&key, n, n as f64)])).await.unwrap();
        c.commit().await.unwrap();
        model.insert(key, n);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Until archiving has moved something (it runs every 100 ms).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let tl = t.timeline().await.unwrap();
        if tl.instants().iter().any(|i| tl.is_archived(&i.requested)) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "hang guard: nothing archived in 10 minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.send(()).unwrap();
    let (report, events) = service.await.unwrap();
    assert!(report.compactions > 0 && report.cleans > 0 && report.archives > 0, "{report:?}");
    assert_eq!(report.failures, 0, "{events:?}");
    let want: Vec<(String, i64, f64)> = model.into_iter().map(|(k, n)| (k, n, n as f64)).collect();
    let read = t.read(&ReadOptions { query: Query::Snapshot, ..Default::default() }).await.unwrap();
    assert_eq!(fares_rows(&read), want);
}

/// `tributary serve` on two tables: SIGTERM stops it, exit code 0, with
/// each table's report.
#[test]
fn the_binary_stops_on_sigterm_with_a_report_per_table() {
    let dir = tempfile::tempdir().unwrap();
    let a = init_trips(dir.path(), "a", &[]);
    let b = init_trips(dir.path(), "b", &[]);
    let input = dir.path().join("in.jsonl");
    std::fs::write(&input, "{\"ts\":1,\"uuid\":\"u1\",\"rider\":null,\"fare\":1.0,\"city\":\"oslo\"}\n").unwrap();
    for t in [&a, &b] {
        tributary_ok(&["write", t.to_str().unwrap(), "--input", input.to_str().unwrap()]);
    }
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["serve", a.to_str().unwrap(), b.to_str().unwrap(), "--compact-every", "50ms"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until both tables are compacted, then SIGTERM.
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    while [&a, &b].iter().any(|t| !has_base_file(t)) {
        assert!(std::time::Instant::now() < deadline, "hang guard: no compaction in 10 minutes");
        std::thread::sleep(Duration::from_millis(50));
    }
    let term = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{:?}: {stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    for t in [&a, &b] {
        let line = format!("{}: stopped after", t.display());
        assert!(stdout.contains(&line), "{stdout}");
    }
}

/// Whether a table folder holds a Parquet base file.
fn has_base_file(table: &std::path::Path) -> bool {
    fn walk(dir: &std::path::Path) -> bool {
        std::fs::read_dir(dir).into_iter().flatten().flatten().any(|e| {
            let p = e.path();
            if p.file_name().is_some_and(|n| n == ".hoodie") {
                return false;
            }
            if p.is_dir() { walk(&p) } else { p.extension().is_some_and(|x| x == "parquet") }
        })
    }
    walk(table)
}
