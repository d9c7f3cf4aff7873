//! Shared helpers: what a test needs from outside the project (the Hudi
//! corpus, the official Python reader, an S3 server), the CLI, where a
//! test's tables live (a local folder or S3), fault-injecting and
//! request-counting stores and table file listings.

mod api;
mod corpus;
mod counting;
mod fault;
mod files;
pub mod filters;
mod handoff;
pub mod live_events;
mod oracle;
mod place;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub use api::*;
pub use corpus::*;
pub use counting::*;
pub use fault::*;
pub use files::*;
pub use handoff::*;
pub use oracle::*;
pub use place::*;

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

/// Lock options for a `tributary` process that a test kills: on an object
/// store the lease it may hold at its death blocks the table's lock until
/// the lease runs out, and the default lease (60 s) would stall the test
/// that long. A local folder's OS lock ignores them.
pub const SHORT_LEASE: [&str; 4] = ["--lock-lease", "10s", "--lock-renew-interval", "2s"];

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

/// `tributary init dir/<name>` of a trips table (see [`init_trips_at`]);
/// returns the table path. [`Place::init_trips`] does the same on any store.
pub fn init_trips(dir: &Path, name: &str, extra: &[&str]) -> PathBuf {
    let table = dir.join(name);
    init_trips_at(dir, table.to_str().unwrap(), extra);
    table
}

/// `tributary init <table>` (a path or URI) of a trips table keyed by
/// `uuid`, ordered by `ts`, with `extra` options; its schema is written to
/// `scratch`.
pub fn init_trips_at(scratch: &Path, table: &str, extra: &[&str]) {
    let schema = trips_schema(scratch);
    let mut args =
        vec!["init", table, "--schema", schema.to_str().unwrap(), "--record-key", "uuid", "--ordering-field", "ts"];
    args.extend_from_slice(extra);
    let out = tributary_ok(&args);
    let version = if extra.windows(2).any(|w| w == ["--table-version", "9"]) { "version 9" } else { "version 8" };
    assert!(out.contains(version), "{out}");
}
