//! The Hudi corpus: real Hudi-written tables, zipped, unzipped at test time.

use std::path::{Path, PathBuf};

use super::{have_official_reader, require};

/// `../shared/hudi-corpus`, or `$TRIBUTARY_CORPUS`; when it is absent,
/// `None` (and a SKIP line), or a failure under `CI` (see [`require`]).
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TRIBUTARY_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/hudi-corpus"));
    let what = format!("the Hudi corpus at {}", dir.display());
    require(&what, "set TRIBUTARY_CORPUS", dir.is_dir().then_some(dir))
}

/// The second corpus folder, `../shared/hudi-corpus-next` (or
/// `$TRIBUTARY_CORPUS_NEXT`): table version 9, replaced file groups,
/// Parquet log blocks. `None` (and a SKIP line) or a failure under `CI`
/// when it is absent (see [`require`]).
pub fn corpus_next_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TRIBUTARY_CORPUS_NEXT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/hudi-corpus-next"));
    let what = format!("the second Hudi corpus at {}", dir.display());
    require(&what, "set TRIBUTARY_CORPUS_NEXT", dir.is_dir().then_some(dir))
}

/// Every zip of both corpus folders whose file name starts with `prefix`;
/// `None` when either folder is missing (see [`require`]).
pub fn all_corpus_zips(prefix: &str) -> Option<Vec<PathBuf>> {
    let (first, next) = (corpus_dir()?, corpus_next_dir()?);
    let mut zips = corpus_zips(&first, prefix);
    zips.extend(corpus_zips(&next, prefix));
    Some(zips)
}

/// Every zip under the corpus whose file name starts with `prefix` (e.g. "v8_").
pub fn corpus_zips(corpus: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![corpus.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "zip")
                && p.file_name().unwrap().to_string_lossy().starts_with(prefix)
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Unzips a corpus table into `into` and returns the table's base path (the
/// zip's top-level folder other than `__MACOSX`).
pub fn unzip_table(zip: &Path, into: &Path) -> PathBuf {
    let file = std::fs::File::open(zip).unwrap();
    let mut archive = zip::ZipArchive::new(file).unwrap();
    archive.extract(into).unwrap();
    let stem = zip.file_stem().unwrap();
    let base = into.join(stem);
    assert!(base.join(".hoodie").is_dir(), "{} has no table folder {}", zip.display(), base.display());
    base
}

/// Both corpus folders' Merge-on-Read tables (Avro and Parquet log
/// blocks), for tests that compare with the official reader: `None` when a
/// corpus folder or the reader is missing (see [`require`]).
pub fn mor_tables() -> Option<Vec<PathBuf>> {
    let zips = all_corpus_zips("v")?;
    if !have_official_reader() {
        return None;
    }
    Some(zips.into_iter().filter(|z| z.to_string_lossy().contains("/mor/")).collect())
}

/// Every table of both corpus folders, Copy-on-Write and Merge-on-Read,
/// for tests that compare with the official reader (see [`mor_tables`]).
pub fn every_table() -> Option<Vec<PathBuf>> {
    let zips = all_corpus_zips("v")?;
    have_official_reader().then_some(zips)
}

/// The folder of a table's timeline: `.hoodie/timeline` (layout 2) or
/// `.hoodie` (layout 1).
pub fn timeline_folder(base: &Path) -> PathBuf {
    let layout2 = base.join(".hoodie/timeline");
    if layout2.is_dir() { layout2 } else { base.join(".hoodie") }
}

/// `(requested, completed)` of a table's completed commits of any kind
/// (`commit`, `deltacommit`, `replacecommit`), by requested time, from the
/// timeline's file names: layout 2 names carry the completion time, a
/// layout-1 name stands for both.
pub fn completed_commits(base: &Path) -> Vec<(String, String)> {
    let mut done: Vec<(String, String)> = std::fs::read_dir(timeline_folder(base))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| [".deltacommit", ".commit", ".replacecommit"].iter().any(|s| n.ends_with(s)))
        .filter_map(|n| {
            let stem = n.split('.').next()?.to_string();
            Some(match stem.split_once('_') {
                Some((t, c)) => (t.to_string(), c.to_string()),
                None => (stem.clone(), stem),
            })
        })
        .collect();
    done.sort();
    done
}
