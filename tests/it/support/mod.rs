//! Shared helpers: what a test needs from outside the project (the Hudi
//! corpus, the official Python reader), the CLI, fault-injecting and
//! request-counting stores and table file listings.

mod api;
mod corpus;
mod counting;
mod fault;
mod files;
pub mod live_events;
mod oracle;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use api::*;
pub use corpus::*;
pub use counting::*;
pub use fault::*;
pub use files::*;
pub use oracle::*;

/// The one rule for a fixture or oracle that is missing (the Hudi corpus, the
/// official reader): under `CI` the test fails, since a test that cannot
/// check must not pass; elsewhere it prints a SKIP line and the caller
/// returns. Gives back `found`.
#[must_use = "return from the test when the fixture or oracle is missing"]
pub fn require<T>(what: &str, hint: &str, found: Option<T>) -> Option<T> {
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{what} is missing, and under CI a test may not pass without it ({hint})"
        );
        eprintln!("SKIP: {what} is missing ({hint})");
    }
    found
}

/// Whether the official reader (`pip install hudi==0.5.0`) is importable;
/// see [`require`] for what its absence does.
pub fn have_official_reader() -> bool {
    let ok = Command::new("python3").args(["-c", "import hudi"]).output().is_ok_and(|o| o.status.success());
    require("the official Hudi reader (python3 -c 'import hudi')", "pip install hudi==0.5.0", ok.then_some(()))
        .is_some()
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

/// Runs `tributary`, requiring a clean failure (a documented exit code, not a panic); returns stderr.
pub fn tributary_err(args: &[&str]) -> String {
    let out = tributary(args);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(matches!(out.status.code(), Some(1..=5 | 70)), "tributary {args:?} should fail cleanly:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// An Avro schema of the trips shape, written to `dir/trips.avsc`.
pub fn trips_schema(dir: &Path) -> PathBuf {
    let p = dir.join("trips.avsc");
    std::fs::write(&p, live_events::SCHEMA).unwrap();
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
