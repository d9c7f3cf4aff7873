//! SQL through DataFusion (`tributary sql`, `read --where`): answers
//! against the rows a plain read returns, filters pushed into the scan,
//! time travel and read-optimized tables by name, and bad queries.

use std::collections::BTreeMap;

use serde_json::Value;
use tributary::{Query, ReadOptions, Table};
use tributary_compaction::CompactorSettings;

use crate::support::{Place, fares_batch, fares_options, tributary_err, tributary_ok};

/// Rows `(uuid, ts, fare, city)` over two commits, the second updating
/// some keys; then a compaction of the first table only.
async fn tables(place: &Place) -> (Table, Table, String) {
    let mut out = Vec::new();
    for name in ["t", "u"] {
        let t = place.table(name).builder().create(fares_options()).await.unwrap();
        let client = t.write_client(Default::default()).await.unwrap();
        let first: Vec<(String, i64, f64, &str)> = (0..40)
            .map(|i| (format!("k{i:02}"), 100 + i, i as f64, ["oslo", "lima", "rome"][i as usize % 3]))
            .collect();
        let rows: Vec<(&str, i64, f64, &str)> = first.iter().map(|r| (r.0.as_str(), r.1, r.2, r.3)).collect();
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&fares_batch(&rows, None)).await.unwrap();
        c.commit().await.unwrap();
        // Every fourth key again, later, with a fare of 1000 + i.
        let second: Vec<(String, i64, f64, &str)> = (0..40)
            .step_by(4)
            .map(|i| (format!("k{i:02}"), 500 + i, 1000.0 + i as f64, ["oslo", "lima", "rome"][i as usize % 3]))
            .collect();
        let rows: Vec<(&str, i64, f64, &str)> = second.iter().map(|r| (r.0.as_str(), r.1, r.2, r.3)).collect();
        let mut c = client.start_commit().await.unwrap();
        c.write_batch(&fares_batch(&rows, None)).await.unwrap();
        c.commit().await.unwrap();
        out.push(t);
    }
    let first_commit = out[0].timeline().await.unwrap().completed().next().unwrap().requested.to_string();
    out[0].compactor(CompactorSettings::default()).await.unwrap().run_once().await.unwrap();
    let u = out.pop().unwrap();
    (out.pop().unwrap(), u, first_commit)
}

fn lines(out: &str) -> Vec<Value> {
    out.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// `(uuid, fare, city)` of every row a plain read returns.
async fn read(t: &Table, options: ReadOptions) -> Vec<(String, f64, String)> {
    let b = t.read(&options).await.unwrap();
    crate::support::fares_rows(&b)
        .into_iter()
        .zip(b.column_by_name("city").unwrap().as_any().downcast_ref::<arrow::array::StringArray>().unwrap())
        .map(|((uuid, _, fare), city)| (uuid, fare, city.unwrap().to_string()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_answers_equal_the_reads() {
    let Some(place) = Place::new() else { return };
    let (t, _, first) = tables(&place).await;
    let (tu, uu) = (place.table("t").uri().to_string(), place.table("u").uri().to_string());
    let snapshot = read(&t, ReadOptions::default()).await;
    let sql = |query: &str, tables: &[String]| {
        let mut args = vec!["sql", query];
        for table in tables {
            args.extend(["--table", table.as_str()]);
        }
        lines(&tributary_ok(&args))
    };
    let trips = format!("trips={tu}");

    // count(*), and a group-by.
    let n = sql("SELECT count(*) AS n FROM trips", std::slice::from_ref(&trips));
    assert_eq!(n[0]["n"], snapshot.len());
    let by_city =
        sql("SELECT city, count(*) AS n, sum(fare) AS fares FROM trips GROUP BY city", std::slice::from_ref(&trips));
    let mut want: BTreeMap<String, (u64, f64)> = BTreeMap::new();
    for (_, fare, city) in &snapshot {
        let e = want.entry(city.clone()).or_default();
        e.0 += 1;
        e.1 += fare;
    }
    let got: BTreeMap<String, (u64, f64)> = by_city
        .iter()
        .map(|r| (r["city"].as_str().unwrap().to_string(), (r["n"].as_u64().unwrap(), r["fares"].as_f64().unwrap())))
        .collect();
    assert_eq!(got, want);

    // Key lookups: the newest version of each key, pushed into the scan.
    let keys = sql("SELECT uuid, fare FROM trips WHERE uuid IN ('k04', 'k05', 'k99')", std::slice::from_ref(&trips));
    let got: Vec<(String, f64)> = keys
        .iter()
        .map(|r| (r["uuid"].as_str().unwrap().into(), r["fare"].as_f64().unwrap()))
        .collect::<BTreeMap<_, _>>()
        .into_iter()
        .collect();
    assert_eq!(got, [("k04".to_string(), 1004.0), ("k05".to_string(), 5.0)]);
    let explain = "EXPLAIN SELECT uuid FROM trips WHERE uuid = 'k04' AND city = 'lima'";
    let plan = tributary_ok(&["sql", explain, "--table", &trips, "--format", "csv"]);
    assert!(plan.contains("TributaryScanExec") && plan.contains("filter=(uuid = 'k04') AND (city = 'lima')"), "{plan}");
    // Of the six file groups (three cities, two buckets) one can hold it.
    assert!(plan.contains("file_slices=1,"), "{plan}");

    // A join of two tables, and of a table with itself as of its first
    // commit: the keys the second commit changed.
    let joined = sql(
        "SELECT a.uuid FROM trips a JOIN other b ON a.uuid = b.uuid AND a.fare = b.fare",
        &[trips.clone(), format!("other={uu}")],
    );
    assert_eq!(joined.len(), snapshot.len());
    let changed = sql(
        "SELECT a.uuid FROM trips a JOIN old b ON a.uuid = b.uuid WHERE a.fare <> b.fare ORDER BY a.uuid",
        &[trips.clone(), format!("old={tu}@as-of={first}")],
    );
    let want: Vec<String> = (0..40).step_by(4).map(|i| format!("k{i:02}")).collect();
    let got: Vec<String> = changed.iter().map(|r| r["uuid"].as_str().unwrap().to_string()).collect();
    assert_eq!(got, want);

    // Read-optimized by name: the compacted table's base files hold every
    // key; the other table has none.
    let ro = sql("SELECT count(*) AS n FROM c", &[format!("c={tu}@read-optimized")]);
    assert_eq!(ro[0]["n"], read(&t, ReadOptions { query: Query::ReadOptimized, ..Default::default() }).await.len());
    let ro = sql("SELECT count(*) AS n FROM c", &[format!("c={uu}@read-optimized")]);
    assert_eq!(ro[0]["n"], 0);

    // The meta columns are columns.
    let meta =
        sql("SELECT _hoodie_record_key AS k FROM trips WHERE _hoodie_record_key = 'k07'", std::slice::from_ref(&trips));
    assert_eq!(meta.len(), 1);

    // `read --where --columns --limit`.
    let rows =
        lines(&tributary_ok(&["read", &tu, "--where", "fare >= 1000 AND city = 'oslo'", "--columns", "uuid,fare"]));
    let want: Vec<&(String, f64, String)> = snapshot.iter().filter(|r| r.1 >= 1000.0 && r.2 == "oslo").collect();
    assert_eq!(rows.len(), want.len());
    assert!(rows.iter().all(|r| r.as_object().unwrap().len() == 2 && r["fare"].as_f64().unwrap() >= 1000.0));
    assert_eq!(lines(&tributary_ok(&["read", &tu, "--limit", "3"])).len(), 3);

    // A plain read streams its rows in no fixed order; `--sort` orders them
    // by partition and key, alone (a collected read) and with a selection
    // (a sort in DataFusion), limits taking the first rows of that order.
    let key = |r: &Value| {
        (r["_hoodie_partition_path"].as_str().unwrap().to_string(), r["uuid"].as_str().unwrap().to_string())
    };
    let sorted = lines(&tributary_ok(&["read", &tu, "--meta", "--sort"]));
    assert!(sorted.windows(2).all(|w| key(&w[0]) < key(&w[1])), "ordered by partition and key");
    assert_eq!(sorted.len(), snapshot.len());
    let mut streamed = lines(&tributary_ok(&["read", &tu, "--meta"]));
    streamed.sort_by_key(key);
    assert_eq!(streamed, sorted, "the same rows, streamed");
    let first = lines(&tributary_ok(&["read", &tu, "--meta", "--sort", "--limit", "5", "--where", "fare < 1000"]));
    let want: Vec<Value> = sorted.iter().filter(|r| r["fare"].as_f64().unwrap() < 1000.0).take(5).cloned().collect();
    assert_eq!(first, want, "the first rows of the order");

    // Parquet to a file.
    let file = place.scratch().join("out.parquet");
    tributary_ok(&[
        "sql",
        "SELECT * FROM trips",
        "--table",
        &trips,
        "--format",
        "parquet",
        "--output",
        file.to_str().unwrap(),
    ]);
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).unwrap())
            .unwrap();
    assert_eq!(reader.metadata().file_metadata().num_rows() as usize, snapshot.len());
}

/// A syntax error, an unknown column, an unknown table and a filter on a
/// column that does not exist: exit code 2 (invalid input) and
/// DataFusion's message, with the tables named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_queries_are_errors_naming_the_tables() {
    let Some(place) = Place::new() else { return };
    tables(&place).await;
    let tu = place.table("t").uri().to_string();
    let trips = format!("trips={tu}");
    for (query, says) in [
        ("SELEC 1", "SQL error"),
        ("SELECT nope FROM trips", "No field named nope"),
        ("SELECT * FROM trips WHERE nope > 1", "No field named nope"),
        ("SELECT * FROM nope", "table 'datafusion.public.nope' not found"),
    ] {
        let out = crate::support::tributary(&["sql", query, "--table", &trips]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{query}: {stderr}");
        assert!(stderr.contains(says) && stderr.contains(&trips), "{query}: {stderr}");
    }
    let e = tributary_err(&["read", &tu, "--where", "nope > 1"]);
    assert!(e.contains("No field named nope"), "{e}");
    let e = tributary_err(&["sql", "SELECT 1", "--table", "trips"]);
    assert!(e.contains("expected NAME=URI"), "{e}");
    let e = tributary_err(&["sql", "SELECT 1", "--table", &format!("{trips}@as-of=yesterday")]);
    assert!(e.contains("yesterday"), "{e}");
}

/// The provider's statistics: the bytes of the files a scan reads (base
/// files and logs; base files only when read-optimized), as an inexact
/// size, and no row count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provider_states_the_bytes_it_reads() {
    use tributary::sql::datafusion::catalog::TableProvider;
    use tributary::sql::datafusion::common::stats::Precision;
    use tributary::sql::datafusion::physical_plan::statistics::{StatisticsArgs, StatisticsContext};
    use tributary::sql::datafusion::prelude::SessionContext;
    use tributary::sql::{ReadAs, TributaryTable};

    let Some(place) = Place::new() else { return };
    let (_, u, _) = tables(&place).await;
    let files = place.table("u").file_paths(|name| name.ends_with(".parquet") || name.contains(".log."));
    let all: usize = files.iter().filter(|p| !p.contains(".hoodie/")).map(|p| place.table("u").read(p).len()).sum();
    assert!(all > 0);
    let ctx = SessionContext::new();
    for (query, want) in [(Query::Snapshot, all), (Query::ReadOptimized, 0)] {
        let provider =
            TributaryTable::new(u.clone(), ReadAs { query: query.clone(), as_of: None, changes: None }).await.unwrap();
        let exec = provider.scan(&ctx.state(), None, &[], None).await.unwrap();
        let stats = StatisticsContext::new().compute(exec.as_ref(), &StatisticsArgs::new()).unwrap();
        assert_eq!(stats.total_byte_size, Precision::Inexact(want), "{query:?}");
        assert_eq!(stats.num_rows, Precision::Absent);
    }
}
