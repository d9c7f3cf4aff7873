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

/// The corpus's Merge-on-Read tables with Avro logs, for tests that compare
/// with the official reader: `None` when the corpus or the reader is missing
/// (see [`require`]).
pub fn mor_tables() -> Option<Vec<PathBuf>> {
    let corpus = corpus_dir()?;
    if !have_official_reader() {
        return None;
    }
    Some(corpus_zips(&corpus, "v").into_iter().filter(|z| z.to_string_lossy().contains("/mor/avro/")).collect())
}
