//! The table services as one loop (`serve`, `tributary serve`): while a
//! writer commits, it compacts, cleans and archives on its schedules, the
//! table reads the model throughout, and a stop (the shutdown future, or
//! SIGTERM for the binary) ends it after the running job.

use std::time::Duration;

use tributary::{ArchiveSettings, CleanRetention, Query, ReadOptions, ServiceSchedule, serve};
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
        retention: CleanRetention::Commits(2),
        archive_every: Some(Duration::from_millis(100)),
        archive: tight(),
        change_log_every: None,
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
        if tl.instants().any(|i| tl.is_archived(&i.requested)) {
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

/// A free local port: bound, then let go for the process under test.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The value of the sample of `name` whose labels include every one of
/// `labels` (`key="value"`) in the Prometheus text `page`; `None` when
/// there is none.
fn sample(page: &str, name: &str, labels: &[&str]) -> Option<f64> {
    page.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (series, value) = l.rsplit_once(' ')?;
        let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
        (metric == name && labels.iter().all(|want| rest.contains(want))).then(|| value.parse().ok())?
    })
}

/// Reads the endpoint at `port` with a real HTTP client until `done`
/// holds for its page (or 10 minutes pass); returns that page.
fn scrape_until(port: u16, done: impl Fn(&str) -> bool) -> String {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(600);
    let mut last = String::new();
    loop {
        let url = format!("http://127.0.0.1:{port}/metrics");
        if let Ok(page) = runtime.block_on(async { reqwest::get(&url).await?.error_for_status()?.text().await }) {
            if done(&page) {
                return page;
            }
            last = page;
        }
        assert!(std::time::Instant::now() < deadline, "hang guard: the endpoint never showed it; last page:\n{last}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `write --metrics-addr` and `serve --metrics-addr`: what each endpoint
/// shows, read with an HTTP client, is what the test did: 3 commits of 6
/// records, then one compaction of a file group holding 3 logs.
#[test]
fn the_metrics_endpoints_show_what_the_processes_did() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let t = init_trips(dir.path(), "m", &["--buckets", "1"]);
    let table = t.to_str().unwrap();
    let port = free_port();
    let mut writer = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["write", table, "--input", "-", "--commit-every", "2", "--metrics-addr"])
        .arg(format!("127.0.0.1:{port}"))
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    for n in 0..6 {
        writeln!(stdin, "{{\"ts\":{n},\"uuid\":\"u{n}\",\"rider\":null,\"fare\":1.0,\"city\":\"oslo\"}}").unwrap();
    }
    stdin.flush().unwrap();
    let table_label = "table=\"m\"";
    // A scrape reads each counter on its own, so it can fall between two
    // updates of one commit; wait until every counter has caught up.
    let page = scrape_until(port, |p| {
        sample(p, "tributary_commits_total", &[table_label]) == Some(3.0)
            && sample(p, "tributary_records_written_total", &[table_label, "op=\"upsert\""]) == Some(6.0)
    });
    assert_eq!(sample(&page, "tributary_file_group_logs_max", &[table_label]), Some(3.0), "{page}");
    assert!(sample(&page, "tributary_store_requests_total", &[table_label, "kind=\"put\""]).unwrap() >= 3.0);
    assert!(sample(&page, "tributary_lock_hold_seconds_count", &[table_label]).unwrap() >= 3.0, "{page}");
    assert!(page.contains("# TYPE tributary_lock_wait_seconds histogram"), "{page}");
    drop(stdin);
    let out = writer.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let port = free_port();
    let server = std::process::Command::new(env!("CARGO_BIN_EXE_tributary"))
        .args(["serve", table, "--compact-every", "1h", "--clean-every", "0s", "--archive-every", "0s"])
        .arg("--metrics-addr")
        .arg(format!("127.0.0.1:{port}"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let page = scrape_until(port, |p| {
        sample(p, "tributary_compactions_total", &[table_label]) == Some(1.0)
            && sample(p, "tributary_compacted_records_total", &[table_label]) == Some(6.0)
    });
    assert_eq!(sample(&page, "tributary_file_group_logs_max", &[table_label]), Some(3.0), "{page}");
    assert_eq!(sample(&page, "tributary_compactions_pending", &[table_label]), Some(0.0), "{page}");
    assert!(sample(&page, "tributary_compaction_lag_seconds", &[table_label]).unwrap() > 0.0, "{page}");
    assert_eq!(sample(&page, "tributary_commits_total", &[table_label]), None, "serve commits nothing");
    let term = std::process::Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert!(term.success());
    let out = server.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
