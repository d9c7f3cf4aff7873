//! What a commit costs in store requests: the same at the 5th commit as at
//! the 60th, so a long-lived table does not make commits slower or dearer
//! on an object store.

use std::sync::Arc;

use tributary::{CreateOptions, Table};
use tributary_timeline::TableLocation;
use tributary_timeline::{CountingStore, Requests};
use tributary_writer::{WriteClient, WriteSettings};

use crate::support::{FARES_SCHEMA, hybrid, oslo_batch};

fn settings(id: &str) -> WriteSettings {
    WriteSettings { writer_id: id.into(), tasks: 1, ..Default::default() }
}

async fn commit(store: &CountingStore, client: &WriteClient, i: i64) -> Requests {
    store.take();
    let mut c = client.start_commit().await.unwrap();
    let rows: Vec<(String, i64, f64)> = (0..8).map(|k| (format!("k{k}"), i, i as f64)).collect();
    let rows: Vec<(&str, i64, f64)> = rows.iter().map(|(k, t, f)| (k.as_str(), *t, *f)).collect();
    c.write_batch(&oslo_batch(&rows)).await.unwrap();
    c.commit_with_checkpoint(Some(format!("offset-{i}"))).await.unwrap();
    store.take()
}

/// Every request a commit makes, with the table's default lock on an object
/// store (the lease document, also counted): the same early and late in the
/// table's life, for a long-lived client and for a new one per commit (a CLI
/// run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_costs_the_same_however_long_the_timeline() {
    let store = Arc::new(CountingStore::new(Arc::new(object_store::memory::InMemory::new())));
    let loc = TableLocation::new(store.clone(), object_store::path::Path::from("warehouse/fares"));
    let mut options = CreateOptions::new(FARES_SCHEMA, "uuid", "ts");
    options.partition_field = Some("city".into());
    options.buckets = 4;
    let t = Table::builder(loc).with_settings(hybrid()).create(options).await.unwrap();
    let client = t.write_client(settings("long-lived")).await.unwrap();
    client.register().await.unwrap();
    for i in 0..3 {
        commit(&store, &client, i).await;
    }
    let early = commit(&store, &client, 3).await;
    let fresh_early = {
        let c = t.write_client(settings("fresh")).await.unwrap();
        c.register().await.unwrap();
        commit(&store, &c, 4).await
    };
    for i in 5..60 {
        commit(&store, &client, i).await;
    }
    assert_eq!(t.timeline().await.unwrap().completed().count(), 60);
    let late = commit(&store, &client, 60).await;
    let fresh_late = {
        let c = t.write_client(settings("fresh")).await.unwrap();
        c.register().await.unwrap();
        commit(&store, &c, 61).await
    };
    println!("requests of a commit (8 rows, 4 buckets): long-lived client {late}; new client {fresh_late}");
    assert_eq!(early, late, "a long-lived client's commit, early and late");
    assert_eq!(fresh_early, fresh_late, "a new client's commit, early and late");
    // Its instant's markers, to remove them; and the active timeline once,
    // under the lock, for the table's bound on logs per file group.
    assert_eq!(late.lists, 2, "a long-lived client lists its instant's markers and the active timeline: {late}");
}
