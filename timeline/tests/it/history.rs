//! Reading what Java's writers archived into a table's LSM history: the
//! history snapshot itself, and the timeline with archived instants merged
//! in.

mod snapshot {
    use std::sync::Arc;

    use arrow::array::RecordBatch;
    use object_store::ObjectStoreExt;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use tributary_testkit::history::{self, write_snapshot};
    use tributary_timeline::CountingStore;
    use tributary_timeline::{Action, Instant, InstantTime, NewTableConfig, TableConfig, TableLocation};
    use tributary_timeline::{History, VERSION_FILE, history_dir, snapshot_files};

    fn table() -> (TableLocation, TableConfig, Path) {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("t"));
        let config = TableConfig::new_table(&NewTableConfig::new("t", "id", "ts", "{}"));
        let dir = history_dir(&loc, &config).unwrap();
        (loc, config, dir)
    }

    fn t(s: &str) -> InstantTime {
        InstantTime::parse(s).unwrap()
    }

    #[tokio::test]
    async fn reads_the_latest_snapshot_only() {
        let (loc, _, dir) = table();
        let meta: &[u8] = b"Obj\x01 commit metadata";
        // Snapshot 1: two files; snapshot 2 (an LSM compaction) replaces
        // them by one; the old files stay behind, unlisted.
        write_snapshot(
            &loc,
            &dir,
            1,
            &[
                vec![("20250101000000001", Some("20250101000000003"), "deltacommit", Some(meta))],
                vec![("20250101000000002", Some("20250101000000009"), "deltacommit", None)],
            ],
        )
        .await
        .unwrap();
        write_snapshot(
            &loc,
            &dir,
            2,
            &[vec![
                ("20250101000000001", Some("20250101000000003"), "deltacommit", Some(meta)),
                ("20250101000000002", Some("20250101000000009"), "deltacommit", None),
                ("20250101000000004", None, "clean", None),
                ("20250101000000005", Some("20250101000000006"), "commit", None),
                ("20250101000000007", Some("20250101000000008"), "frobnicate", None),
            ]],
        )
        .await
        .unwrap();
        let files = snapshot_files(&loc, &dir).await.unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path.filename(), Some("20250101000000001_20250101000000007_0.parquet"));

        let loaded = History::load(&loc, &dir).await.unwrap();
        assert_eq!(loaded.files(), files);
        let instants: Vec<Instant> = loaded.instants().cloned().collect();
        let warnings = loaded.warnings();
        let got: Vec<(&str, Action, Option<&str>)> = instants
            .iter()
            .map(|i| (i.requested.as_str(), i.action, i.completed.as_ref().map(InstantTime::as_str)))
            .collect();
        assert_eq!(
            got,
            vec![
                ("20250101000000001", Action::DeltaCommit, Some("20250101000000003")),
                ("20250101000000002", Action::DeltaCommit, Some("20250101000000009")),
                // No completion time: completed at its requested time, as Java reads it.
                ("20250101000000004", Action::Clean, Some("20250101000000004")),
                // The archive names a compaction by its completed action.
                ("20250101000000005", Action::Commit, Some("20250101000000006")),
            ]
        );
        assert!(instants.iter().all(Instant::is_completed));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("unknown action `frobnicate`"), "{warnings:?}");

        // Loaded (rows known) or only opened (the covering files read on
        // demand), lookups and contents agree.
        let opened = History::open(&loc, &dir).await.unwrap();
        for history in [&loaded, &opened] {
            let found = history.find_instant(&t("20250101000000002")).await.unwrap().unwrap();
            assert_eq!(found.completed, Some(t("20250101000000009")));
            assert_eq!(history.find_instant(&t("20250101000000003")).await.unwrap(), None);
            let blob = history.read_metadata(&t("20250101000000001")).await.unwrap().unwrap();
            assert_eq!(&blob[..], meta);
            assert_eq!(history.read_metadata(&t("20250101000000002")).await.unwrap().unwrap().len(), 0);
            assert_eq!(history.read_metadata(&t("20250101000000003")).await.unwrap(), None);
        }

        // Without `_version_`, the highest manifest listed is the latest.
        loc.store.delete(&dir.clone().join(VERSION_FILE)).await.unwrap();
        assert_eq!(snapshot_files(&loc, &dir).await.unwrap(), files);
        assert_eq!(History::probe(&loc, &dir).await.unwrap().files(), files);
    }

    /// Many instants' contents at once: each file holding some is read
    /// once, only their rows are returned, instants not held are left out.
    #[tokio::test]
    async fn reads_many_contents_a_file_at_a_time() {
        let (loc, _, dir) = table();
        let m = |n: u8| vec![n; 64 + usize::from(n)];
        let (m1, m3, m4, m6) = (m(1), m(3), m(4), m(6));
        write_snapshot(
            &loc,
            &dir,
            1,
            &[
                vec![
                    ("20250101000000001", Some("20250101000000002"), "deltacommit", Some(&m1[..])),
                    ("20250101000000002", Some("20250101000000003"), "deltacommit", None),
                    ("20250101000000003", Some("20250101000000004"), "deltacommit", Some(&m3[..])),
                ],
                vec![
                    ("20250101000000004", Some("20250101000000005"), "deltacommit", Some(&m4[..])),
                    ("20250101000000006", Some("20250101000000007"), "deltacommit", Some(&m6[..])),
                ],
            ],
        )
        .await
        .unwrap();
        let wanted = [t("20250101000000006"), t("20250101000000001"), t("20250101000000003"), t("20250101000000005")];
        for loaded in [true, false] {
            let history =
                if loaded { History::load(&loc, &dir).await } else { History::open(&loc, &dir).await }.unwrap();
            let got = history.read_metadata_many(&wanted).await.unwrap();
            let got: Vec<(&str, &[u8])> = got.iter().map(|(k, v)| (k.as_str(), &v[..])).collect();
            assert_eq!(
                got,
                vec![("20250101000000001", &m1[..]), ("20250101000000003", &m3[..]), ("20250101000000006", &m6[..])],
                "loaded: {loaded}"
            );
        }
    }

    /// One instant's content out of a large history file (many rows, large
    /// metadata, many pages) fetches its row's pages, not the column.
    #[tokio::test]
    async fn one_content_fetches_its_pages_only() {
        use arrow::array::{BinaryArray, Int32Array, StringArray};
        use arrow::datatypes::{DataType, Field, Schema};

        let (plain, _, dir) = table();
        let counting = Arc::new(CountingStore::new(plain.store.clone()));
        let loc = TableLocation::new(counting.clone(), plain.root.clone());
        let times: Vec<String> = (0..200).map(|n| format!("2025010100000{n:04}")).collect();
        let blob = vec![7u8; 20_000];
        let schema = Arc::new(Schema::new(vec![
            Field::new("instantTime", DataType::Utf8, true),
            Field::new("completionTime", DataType::Utf8, true),
            Field::new("action", DataType::Utf8, true),
            Field::new("metadata", DataType::Binary, true),
            Field::new("version", DataType::Int32, false),
        ]));
        let column = |f: &dyn Fn(&str) -> Option<&str>| Arc::new(StringArray::from_iter(times.iter().map(|t| f(t))));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                column(&|t| Some(t)),
                column(&|t| Some(t)),
                column(&|_| Some("deltacommit")),
                Arc::new(BinaryArray::from_iter(times.iter().map(|_| Some(&blob[..])))),
                Arc::new(Int32Array::from_iter_values(times.iter().map(|_| 1))),
            ],
        )
        .unwrap();
        // Uncompressed, pages of a few rows, a page index (the default).
        let props = parquet::file::properties::WriterProperties::builder()
            .set_data_page_size_limit(50_000)
            .set_dictionary_enabled(false)
            .build();
        let mut file = Vec::new();
        let mut writer = parquet::arrow::ArrowWriter::try_new(&mut file, schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let (name, len) = (format!("{}_{}_0.parquet", times[0], times[199]), file.len() as u64);
        loc.put(&dir.clone().join(name.as_str()), file).await.unwrap();
        history::write_manifest(&loc, &dir, 1, &[(name, len)]).await.unwrap();

        let history = History::load(&loc, &dir).await.unwrap();
        let before = counting.bytes_read();
        let got = history.read_metadata(&t(&times[150])).await.unwrap().unwrap();
        assert_eq!(&got[..], &blob[..]);
        let fetched = counting.bytes_read() - before;
        assert!(fetched < len / 20, "{fetched} of {len} bytes fetched");
    }
}

mod timeline {
    use std::sync::Arc;

    use object_store::memory::InMemory;
    use object_store::path::Path;
    use tributary_testkit::history::archive;
    use tributary_timeline::CountingStore;
    use tributary_timeline::{
        Action, BucketHash, BucketSpec, Instant, InstantTime, NewTableConfig, State, TableConfig, TableLocation,
        Timeline, TimelineFolder,
    };

    fn config() -> TableConfig {
        TableConfig::new_table(&NewTableConfig {
            bucket: BucketSpec { num_buckets: 2, hash: BucketHash::Murmur3 },
            ..NewTableConfig::new("t", "id", "ts", "{}")
        })
    }

    /// Archiving as Java does (history first, then the active files): the
    /// loaded timeline, a completed file's content and a completion check
    /// all find the instant in the history.
    #[tokio::test]
    async fn loads_and_reads_archived_instants() {
        let loc = TableLocation::new(Arc::new(InMemory::new()), Path::from("tables/t"));
        let cfg = config();
        let writer = TimelineFolder::new(&loc, &cfg);
        let mut done = Vec::new();
        for n in 1..=3u32 {
            let t = InstantTime::parse(&format!("2025010100000{n}000")).unwrap();
            let mut i = Instant::requested(t, Action::DeltaCommit);
            writer.create(&i, State::Requested, Vec::new()).await.unwrap();
            i.completed = Some(InstantTime::parse(&format!("2025010100000{n}500")).unwrap());
            i.state = State::Completed;
            writer.create(&i, State::Completed, format!("meta {n}").into_bytes()).await.unwrap();
            done.push(i);
        }
        let before = Timeline::load(&loc, &cfg).await.unwrap();
        archive(&loc, &cfg, &done[..2]).await.unwrap();
        let tl = Timeline::load(&loc, &cfg).await.unwrap();
        assert!(tl.instants().eq(before.instants()), "the same instants, two of them archived: {tl:?}, {before:?}");
        assert!(tl.is_archived(&done[0].requested) && tl.is_archived(&done[1].requested));
        assert!(!tl.is_archived(&done[2].requested));
        // Read from the history, also with an instant listed before it was archived.
        assert_eq!(&writer.read(before.instants().next().unwrap(), State::Completed).await.unwrap()[..], b"meta 1");
        assert!(writer.is_completed(&done[1]).await.unwrap());
        assert!(writer.is_completed(&done[2]).await.unwrap());
        let other_completion = Instant { completed: done[2].completed.clone(), ..done[1].clone() };
        assert!(!writer.is_completed(&other_completion).await.unwrap());
        let never = Instant::requested(InstantTime::parse("20250101000004000").unwrap(), Action::DeltaCommit);
        let never = Instant { completed: Some(InstantTime::parse("20250101000004500").unwrap()), ..never };
        assert!(!writer.is_completed(&never).await.unwrap());
        assert!(writer.read(&never, State::Completed).await.unwrap_err().is_not_found());
    }

    /// With the loaded timeline at hand, archived contents come from the
    /// history snapshot it read: no listing, no request to the active
    /// timeline, no `_version_` or manifest again (here they are gone), and
    /// the one history file is read once for both.
    #[tokio::test]
    async fn reads_archived_contents_through_the_loaded_snapshot() {
        let plain = TableLocation::new(Arc::new(InMemory::new()), Path::from("tables/t"));
        let counting = Arc::new(CountingStore::new(plain.store.clone()));
        let loc = TableLocation::new(counting.clone(), plain.root.clone());
        let cfg = config();
        let writer = TimelineFolder::new(&loc, &cfg);
        let mut done = Vec::new();
        for n in 1..=3u32 {
            let t = InstantTime::parse(&format!("2025010100000{n}000")).unwrap();
            let i = Instant {
                state: State::Completed,
                completed: Some(InstantTime::parse(&format!("2025010100000{n}500")).unwrap()),
                ..Instant::requested(t, Action::DeltaCommit)
            };
            writer.create(&i, State::Completed, format!("meta {n}").into_bytes()).await.unwrap();
            done.push(i);
        }
        archive(&loc, &cfg, &done[..2]).await.unwrap();
        let tl = Timeline::load(&loc, &cfg).await.unwrap();
        let dir = tributary_timeline::history_dir(&loc, &cfg).unwrap();
        for name in [tributary_timeline::VERSION_FILE, "manifest_1"] {
            tributary_timeline::delete_if_exists(&loc, &dir.clone().join(name)).await.unwrap();
        }
        counting.take();
        let wanted: Vec<&Instant> = done.iter().rev().collect();
        let got = writer.read_completed(&tl, &wanted).await.unwrap();
        assert_eq!(got, [&b"meta 3"[..], b"meta 2", b"meta 1"]);
        let r = counting.take();
        assert_eq!((r.lists, r.heads), (0, 0), "{r:?}");
        // The history file is read once for both archived instants: no more
        // requests than for one of them.
        let one = writer.read_completed(&tl, &[&done[0]]).await.unwrap();
        assert_eq!(one, [&b"meta 1"[..]]);
        let for_one = counting.take().gets;
        writer.read_completed(&tl, &[&done[0], &done[1]]).await.unwrap();
        let for_both = counting.take().gets;
        assert!(for_both <= for_one, "{for_both} requests for both, {for_one} for one");
    }
}
