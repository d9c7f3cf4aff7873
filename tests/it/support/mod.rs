//! Shared helpers: the Hudi corpus, the official Python reader, the CLI.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `../shared/hudi-corpus`, or `$TRIBUTARY_CORPUS`; `None` (and a SKIP line)
/// when it is absent.
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("TRIBUTARY_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/hudi-corpus"));
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("SKIP: Hudi corpus not found at {} (set TRIBUTARY_CORPUS)", dir.display());
        None
    }
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

/// Whether the official reader (`pip install hudi==0.5.0`) is importable.
/// In CI (`CI` set) its absence is a failure, elsewhere a SKIP.
pub fn have_official_reader() -> bool {
    let ok = Command::new("python3").args(["-c", "import hudi"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("CI").is_none(),
            "the official Hudi reader is not installed (pip install hudi==0.5.0)"
        );
        eprintln!("SKIP: python3 -c 'import hudi' failed; pip install hudi==0.5.0");
    }
    ok
}

/// Runs a Python snippet with `args` as `sys.argv[1:]` and returns its stdout.
pub fn python(script: &str, args: &[&str]) -> String {
    let out = Command::new("python3").arg("-c").arg(script).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "python failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs the `tributary` binary.
pub fn tributary(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tributary")).args(args).output().unwrap()
}

/// Runs `tributary`, requiring success; returns stdout.
pub fn tributary_ok(args: &[&str]) -> String {
    let out = tributary(args);
    assert!(out.status.success(), "tributary {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `tributary`, requiring a clean failure (exit code 1, not a panic); returns stderr.
pub fn tributary_err(args: &[&str]) -> String {
    let out = tributary(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "tributary {args:?} should fail cleanly:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// An Avro schema of the trips shape, written to `dir/trips.avsc`.
pub fn trips_schema(dir: &Path) -> PathBuf {
    let p = dir.join("trips.avsc");
    std::fs::write(
        &p,
        r#"{"type":"record","name":"trips_record","namespace":"hoodie.trips","fields":[
            {"name":"ts","type":"long"},{"name":"uuid","type":"string"},
            {"name":"rider","type":["null","string"],"default":null},
            {"name":"fare","type":"double"},{"name":"city","type":"string"}]}"#,
    )
    .unwrap();
    p
}

/// `tributary init dir/<name>` of a trips table keyed by `uuid`, ordered by
/// `ts`, with `extra` options; returns the table path.
pub fn init_trips(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let schema = trips_schema(dir);
    let table = dir.join(name);
    let mut args = vec![
        "init",
        table.to_str().unwrap(),
        "--schema",
        schema.to_str().unwrap(),
        "--record-key",
        "uuid",
        "--ordering-field",
        "ts",
    ];
    args.extend_from_slice(extra);
    let out = tributary_ok(&args);
    assert!(out.contains("version 8"), "{out}");
    table
}
