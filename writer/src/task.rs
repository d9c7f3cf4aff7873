//! A commit's writer task: the actor that owns some buckets, assembles
//! their log files record by record, up to its share of the memory budget,
//! and flushes them as new log files, each announced by a marker first.
//! Each file group's log file is assembled by a `GroupFile`
//! (`group_file`), from the pieces (`piece`) the commit routes to the task.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering as AtomicOrdering;

use futures::StreamExt;
use tokio::sync::mpsc;
use tributary_format::HeaderKey;
use tributary_format::{DeleteRecord, MetaFields, OrderingValue};
use tributary_timeline::PARTITION_METADATA;
use tributary_timeline::ensure_partition;
use tributary_timeline::{Action, BaseFileName, InstantTime, LogFileName, TableLocation, WriteToken, nbcc_file_id};
use tributary_timeline::{MARKER_APPEND, create_marker};
use tributary_timeline::{TimelineFolder, replaced_groups};

use crate::error::{Error, Result};
use crate::file_write::FileWrite;
use crate::group_file::{Encoding, GroupFile};
use crate::piece::Piece;
use crate::shared::Shared;

pub(crate) struct TaskContext {
    shared: Arc<Shared>,
    instant: InstantTime,
    task: u64,
    budget: usize,
    enc: Encoding,
    groups: HashMap<(Arc<str>, u32), GroupFile>,
    buffered: usize,
    versions: HashMap<(Arc<str>, u32), u32>,
    written: Vec<FileWrite>,
    cancelled: Arc<std::sync::atomic::AtomicBool>,
}

impl TaskContext {
    pub(crate) fn new(
        shared: Arc<Shared>,
        instant: InstantTime,
        task: u64,
        budget: usize,
        cancelled: Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        let mut header = vec![
            (HeaderKey::Schema, shared.schema.log_json().to_string()),
            (HeaderKey::InstantTime, instant.to_string()),
        ];
        if shared.schema.is_partial() {
            header.push((HeaderKey::IsPartial, "true".to_string()));
        }
        let enc = Encoding { shared: shared.clone(), instant: instant.clone(), header, seqno: 1, encoder: None };
        Self {
            shared,
            instant,
            task,
            budget,
            enc,
            groups: HashMap::new(),
            buffered: 0,
            versions: HashMap::new(),
            written: Vec::new(),
            cancelled,
        }
    }

    pub(crate) async fn run(mut self, mut rx: mpsc::Receiver<Piece>) -> Result<Vec<FileWrite>> {
        while let Some(piece) = rx.recv().await {
            if self.cancelled.load(AtomicOrdering::SeqCst) {
                return Ok(self.finish());
            }
            self.add(piece).await?;
            if self.buffered >= self.budget {
                self.flush_all().await?;
            }
        }
        if !self.cancelled.load(AtomicOrdering::SeqCst) {
            self.flush_all().await?;
        }
        Ok(self.finish())
    }

    /// What the task wrote; its encoder goes back to the client for later
    /// commits.
    fn finish(mut self) -> Vec<FileWrite> {
        if let Some(e) = self.enc.encoder.take() {
            self.shared.keep_encoder(e);
        }
        std::mem::take(&mut self.written)
    }

    /// Takes a piece's rows into its file group's log file: each kept row
    /// to be combined with the key's other versions, each deleted row as a
    /// delete.
    async fn add(&mut self, p: Piece) -> Result<()> {
        let group = (p.partition.clone(), p.bucket);
        if !self.groups.contains_key(&group) {
            let file_id = self.file_id(&p.partition, p.bucket).await?;
            let meta = MetaFields::new(self.instant.as_str(), self.task, &p.partition, &file_id);
            let g = GroupFile::new(p.partition.clone(), file_id, meta, self.shared.combiner());
            self.groups.insert(group.clone(), g);
        }
        let Some(g) = self.groups.get_mut(&group) else { return Ok(()) };
        let before = g.bytes();
        let deleted = p.rows.deleted.as_ref();
        let ord = self.shared.schema.ordering_column(&p.rows.batch, 0);
        let mut source = g.hold(&p);
        // Rows go to the combiner in runs, between deletes and the rows
        // that must follow them.
        let mut run = 0;
        let watch = deleted.is_some() || !g.deleted_keys.is_empty();
        for (i, &r) in p.indices.iter().enumerate().filter(|_| watch) {
            let key = p.keys.value(r as usize);
            if deleted.is_some_and(|d| d.value(r as usize)) {
                g.held.push(source, &p.indices[run..i]);
                run = i + 1;
                g.deletes.push(DeleteRecord {
                    key: key.to_string(),
                    partition: p.partition.to_string(),
                    ordering: ord.as_ref().map_or(OrderingValue::Null, |c| OrderingValue::of(c, r as usize)),
                });
                g.deleted_keys.insert(key.to_string());
            } else if !g.deleted_keys.is_empty() && g.deleted_keys.contains(key) {
                // A row of a key deleted before it: what is held, and the
                // deletes, go first.
                g.held.push(source, &p.indices[run..i]);
                run = i;
                g.seal(&mut self.enc)?;
                source = g.hold(&p);
            }
        }
        g.held.push(source, &p.indices[run..]);
        g.held_bytes += p.indices.len() * p.row_bytes;
        if !self.shared.combines {
            // Nothing to wait for: written while the datums are warm.
            g.write_held(&mut self.enc)?;
        }
        // Sealing replaces estimates by encoded sizes, which may be smaller.
        self.buffered = (self.buffered + g.bytes()).saturating_sub(before);
        Ok(())
    }

    /// Flushes every file group held: seals each log file and stores them
    /// [`FLUSH_CONCURRENCY`] at a time (a local disk syncs them together,
    /// an object store takes the puts in parallel), in bucket order.
    async fn flush_all(&mut self) -> Result<()> {
        let mut groups: Vec<((Arc<str>, u32), GroupFile)> = self.groups.drain().collect();
        groups.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let mut sealed: Vec<Encoded> = Vec::with_capacity(groups.len());
        for ((p, b), g) in groups {
            sealed.extend(self.seal(&p, b, g)?);
        }
        let (loc, instant, task) = (&self.shared.loc, &self.instant, self.task);
        let stored: Vec<Result<(u32, FileWrite, Vec<bytes::Bytes>)>> = futures::stream::iter(sealed)
            .map(|e| e.store(loc, instant, task))
            .buffered(FLUSH_CONCURRENCY)
            .collect()
            .await;
        self.buffered = 0;
        for stored in stored {
            let (bucket, w, blocks) = stored?;
            for b in blocks {
                self.shared.buffers.keep(b, self.shared.settings.buffer_bytes);
            }
            self.versions.insert((Arc::from(w.partition.as_str()), bucket), w.version);
            self.written.push(w);
        }
        Ok(())
    }

    /// One file group's log file sealed: its last data block finished, the
    /// deletes still waiting appended as a DELETE block; `None` when it holds
    /// nothing.
    fn seal(&mut self, partition: &Arc<str>, bucket: u32, mut g: GroupFile) -> Result<Option<Encoded>> {
        g.seal(&mut self.enc)?;
        let GroupFile { file_id, sealed, records, deletes_sealed: deletes, .. } = g;
        if sealed.is_empty() {
            return Ok(None);
        }
        let version = self.versions.get(&(partition.clone(), bucket)).copied().unwrap_or(0) + 1;
        Ok(Some(Encoded {
            write: FileWrite {
                partition: partition.to_string(),
                file_id,
                name: String::new(),
                version,
                records,
                deletes,
                blocks: sealed.len() as u64,
                bytes: sealed.iter().map(|b| b.len() as u64).sum(),
            },
            bucket,
            blocks: sealed,
        }))
    }

    async fn file_id(&mut self, partition: &Arc<str>, bucket: u32) -> Result<String> {
        let cached = self.shared.file_ids.lock().ok().and_then(|m| m.get(partition).cloned());
        let ids = match cached {
            Some(ids) => ids,
            None => {
                let ids = Arc::new(self.list_file_ids(partition).await?);
                if let Ok(mut m) = self.shared.file_ids.lock() {
                    m.insert(partition.clone(), ids.clone());
                }
                ids
            }
        };
        Ok(ids.get(&bucket).cloned().unwrap_or_else(|| nbcc_file_id(bucket)))
    }

    /// Lists a partition once: the file id already used for each bucket,
    /// leaving out groups a completed replacecommit replaced (a Java
    /// writer's insert overwrite gives a bucket a new group, which Hudi's
    /// bucket index then writes, as this does).
    async fn list_file_ids(&self, partition: &Arc<str>) -> Result<HashMap<u32, String>> {
        let loc = &self.shared.loc;
        ensure_partition(loc, partition, &self.instant).await?;
        let timeline = TimelineFolder::new(loc, &self.shared.config).load_active().await?;
        let replaced = replaced_groups(loc, &self.shared.config, &timeline).await?.replaced;
        let dir = loc.join(partition);
        let listing = loc
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| tributary_timeline::Error::store("list", &dir, e))?;
        let mut files: Vec<(String, InstantTime)> = Vec::new();
        for m in listing.objects {
            let Some(name) = m.location.filename() else { continue };
            if name == PARTITION_METADATA {
                continue;
            }
            let id = LogFileName::parse(name)
                .map(|l| (l.file_id, l.instant))
                .or_else(|_| BaseFileName::parse(name).map(|b| (b.file_id, b.instant)));
            if let Ok(id) = id {
                files.push(id);
            }
        }
        // A clustering's new file groups are no buckets, though a random
        // id may begin with eight digits as a bucket's does.
        let clustered: HashSet<&str> = files
            .iter()
            .filter(|(_, t)| timeline.get(t).is_some_and(|i| i.action == Action::Clustering))
            .map(|(id, _)| id.as_str())
            .collect();
        let mut ids: HashMap<u32, String> = HashMap::new();
        for (id, _) in &files {
            if !clustered.contains(id.as_str())
                && !replaced.contains_key(&(partition.to_string(), id.clone()))
                && let Some(b) = tributary_timeline::bucket_of_file_id(id)
            {
                // A file group of a bucket beyond the count: the table's
                // writers use more buckets than this one was given.
                let buckets = self.shared.index.num_buckets();
                if b >= buckets {
                    return Err(Error::InvalidInput {
                        what: format!("{loc} (table {})", self.shared.config.name),
                        reason: format!(
                            "file group {id} in partition `{partition}` is bucket {b}, but this writer has {buckets} \
                             buckets: give the bucket count the table's other writers use"
                        ),
                    });
                }
                // Prefer the smallest id for a bucket so every writer picks the same one.
                let e = ids.entry(b).or_insert_with(|| id.clone());
                if id < e {
                    *e = id.clone();
                }
            }
        }
        Ok(ids)
    }
}

/// How many log files a task stores at once.
const FLUSH_CONCURRENCY: usize = 8;

/// A log file encoded, to be stored: its description (the version to try
/// first; the name is set once stored) and its bytes.
struct Encoded {
    write: FileWrite,
    bucket: u32,
    /// The file's blocks, in order.
    blocks: Vec<bytes::Bytes>,
}

impl Encoded {
    /// Stores the file under the first free version from the one it holds,
    /// each announced by its marker first; yields its bucket, what was
    /// written and the blocks, for their buffers to be used again.
    async fn store(
        self,
        loc: &TableLocation,
        instant: &InstantTime,
        task: u64,
    ) -> Result<(u32, FileWrite, Vec<bytes::Bytes>)> {
        let Encoded { mut write, bucket, blocks } = self;
        let payload: object_store::PutPayload = blocks.iter().cloned().collect();
        let partition = write.partition.as_str();
        loop {
            let name = LogFileName {
                file_id: write.file_id.clone(),
                instant: instant.clone(),
                version: write.version,
                write_token: Some(WriteToken::new(task, 0, 0)),
                suffix: String::new(),
            }
            .to_string();
            let rel = tributary_timeline::partition_file(partition, &name);
            create_marker(loc, instant, partition, &name, MARKER_APPEND).await?;
            // A create that finds its own bytes there (a retry after a lost
            // answer) is done; other bytes mean the name is taken.
            match loc.create(&loc.join(&rel), payload.clone()).await {
                Ok(_) => {
                    write.name = name;
                    drop(payload);
                    return Ok((bucket, write, blocks));
                }
                Err(tributary_timeline::StorageError::AlreadyExists { .. }) => write.version += 1,
                Err(e) => return Err(e.into()),
            }
        }
    }
}
