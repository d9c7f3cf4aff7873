//! The `tributary` command-line tool: [`args`] defines the commands,
//! [`commands`] runs them through the library, [`output`] prints.
//!
//! On failure it prints `error: <message>` to standard error and exits with
//! a code that says what the caller can do (see [`args::EXIT_CODES`]): the
//! [`tributary::ErrorKind::exit_code`] of the error's kind.

mod args;
mod commands;
#[cfg(feature = "kafka")]
mod ingest;
mod metrics;
mod output;
mod sql;

use std::process::ExitCode;

use clap::Parser;

/// The allocator, configured in .cargo/config.toml (README, "Allocator").
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = args::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", e.message());
            e.exit_code()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tributary::{Error, ErrorKind};

    use crate::args::EXIT_CODES;
    use crate::output::Failure;

    #[test]
    fn every_kind_has_its_code_documented() {
        for kind in [
            ErrorKind::InvalidInput,
            ErrorKind::Corrupt,
            ErrorKind::Unavailable,
            ErrorKind::Conflict,
            ErrorKind::Internal,
        ] {
            let line = format!("\n  {:<3} {kind}", kind.exit_code());
            assert!(EXIT_CODES.contains(&line), "{line:?} missing from:\n{EXIT_CODES}");
        }
    }

    #[test]
    fn the_exit_code_is_the_root_errors_kind() {
        let code = |f: Failure| format!("{:?}", f.exit_code());
        let bad = tributary::WriterError::BadRecord { input: "in".into(), record: 2, field: None, reason: "x".into() };
        assert_eq!(code(Failure::from(bad)), format!("{:?}", std::process::ExitCode::from(2)));
        let timeout = tributary::StorageError::LockTimeout { lock: "l".into(), waited: Duration::from_secs(1) };
        assert_eq!(code(Failure::from(Error::from(timeout))), format!("{:?}", std::process::ExitCode::from(4)));
        let aborted =
            Error::CommitAborted(Box::new(Error::InvalidInput { what: "--as-of".into(), reason: "bad".into() }));
        assert_eq!(aborted.to_string(), "--as-of: bad; nothing of this commit was written");
        assert_eq!(code(Failure::from(aborted)), format!("{:?}", std::process::ExitCode::from(2)));
        let pipe = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "broken pipe");
        assert_eq!(code(Failure::from(pipe)), format!("{:?}", std::process::ExitCode::FAILURE));
    }

    #[test]
    fn a_message_leaves_out_causes_it_already_shows() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = Failure::from(Error::Io { what: "cannot open in.jsonl".into(), source: missing });
        assert_eq!(e.message(), "cannot open in.jsonl: no such file");
        assert_eq!(format!("{:?}", e.exit_code()), format!("{:?}", std::process::ExitCode::from(2)));
    }
}
