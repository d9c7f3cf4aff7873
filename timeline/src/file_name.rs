//! Base and log file names (§4 of the format notes).

use std::cmp::Ordering;
use std::fmt;

use crate::error::{Error, Result};
use crate::instant::InstantTime;

/// A write token `{taskPartitionId}-{stageId}-{taskAttemptId}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct WriteToken(String);

impl WriteToken {
    /// Builds a token from its three numbers.
    pub fn new(task: u64, stage: u64, attempt: u64) -> Self {
        Self(format!("{task}-{stage}-{attempt}"))
    }

    /// Parses `d+-d+-d+`.
    pub fn parse(s: &str) -> Result<Self> {
        let number = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
        if s.split('-').count() == 3 && s.split('-').all(number) {
            Ok(Self(s.to_string()))
        } else {
            Err(Error::InvalidName {
                kind: "write token",
                name: s.to_string(),
                reason: "expected three dash-separated numbers".into(),
            })
        }
    }

    /// The token text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WriteToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn check_file_id(file_id: &str, name: &str, kind: &'static str) -> Result<()> {
    if file_id.is_empty() || file_id.contains('_') || file_id.contains('/') {
        return Err(Error::InvalidName {
            kind,
            name: name.to_string(),
            reason: format!("bad file id `{file_id}` (must be non-empty, without `_` or `/`)"),
        });
    }
    Ok(())
}

/// `{fileId}_{writeToken}_{instantTime}.{ext}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct BaseFileName {
    /// File group id.
    pub file_id: String,
    /// Write token.
    pub write_token: WriteToken,
    /// Commit (or compaction) instant that wrote it.
    pub instant: InstantTime,
    /// Extension without the dot (`parquet`).
    pub extension: String,
}

impl BaseFileName {
    /// Parses a base file name.
    pub fn parse(name: &str) -> Result<Self> {
        let bad = |reason: &str| Error::InvalidName {
            kind: "base file name",
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let (stem, extension) = name.rsplit_once('.').ok_or_else(|| bad("no extension"))?;
        if extension.is_empty() || !extension.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(bad("bad extension"));
        }
        let mut parts = stem.splitn(2, '_');
        let file_id = parts.next().unwrap_or_default();
        let rest = parts.next().ok_or_else(|| bad("expected fileId_token_instant"))?;
        let (token, instant) = rest.rsplit_once('_').ok_or_else(|| bad("expected fileId_token_instant"))?;
        check_file_id(file_id, name, "base file name")?;
        Ok(Self {
            file_id: file_id.to_string(),
            write_token: WriteToken::parse(token)?,
            instant: InstantTime::parse(instant)?,
            extension: extension.to_string(),
        })
    }
}

impl fmt::Display for BaseFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}_{}_{}.{}", self.file_id, self.write_token, self.instant, self.extension)
    }
}

/// The suffix of a change-data log (`.{fileId}_{instant}.log.{v}_{token}.cdc`),
/// Hudi's CDC file, which holds change records and no part of a slice.
pub const CHANGE_DATA_SUFFIX: &str = ".cdc";

/// `.{fileId}_{deltaCommitTime}.log.{version}_{writeToken}[.cdc]`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LogFileName {
    /// File group id.
    pub file_id: String,
    /// Delta-commit instant that wrote it (v8); the base instant in v6.
    pub instant: InstantTime,
    /// Version, from 1.
    pub version: u32,
    /// Write token, if present.
    pub write_token: Option<WriteToken>,
    /// `.cdc` for a change-data log, else empty.
    pub suffix: String,
}

impl LogFileName {
    /// Parses a log file name. Accepted: `.{fileId}_{instant}.log.{version}`,
    /// optionally followed by `_{writeToken}` and, after a token, by
    /// `.cdc`; nothing else may follow. The file id is not empty, holds no
    /// `_` or `/` and does not start with `.`; the instant is an instant
    /// time; the version is decimal digits within `u32`; the token is three
    /// dash-separated numbers. Every log file name Hudi writes has this
    /// form. Hudi's own test (`FSUtils.LOG_FILE_PATTERN`, matched with
    /// `find`) accepts more: any text after the name (so Hadoop's checksum
    /// sidecar `..{fileId}_{t}.log.1_0-1-2.crc` passes, as a log file of
    /// file id `.{fileId}`), `.archive.` for `.log.`, a file id with `_`,
    /// and any instant text; such names are refused here.
    pub fn parse(name: &str) -> Result<Self> {
        let bad = |reason: &str| Error::InvalidName {
            kind: "log file name",
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let body = name.strip_prefix('.').ok_or_else(|| bad("log file names start with `.`"))?;
        let (head, tail) = body.split_once(".log.").ok_or_else(|| bad("no `.log.` part"))?;
        let (file_id, instant) = head.split_once('_').ok_or_else(|| bad("expected fileId_instant"))?;
        check_file_id(file_id, name, "log file name")?;
        if file_id.starts_with('.') {
            return Err(bad("a file id does not start with `.` (a Hadoop checksum file?)"));
        }
        let (version, token, suffix) = match tail.split_once('_') {
            None => (tail, None, ""),
            Some((v, rest)) => {
                let (token, suffix) = match rest.split_once('.') {
                    Some((t, "cdc")) => (t, CHANGE_DATA_SUFFIX),
                    Some(_) => return Err(bad("only `.cdc` may follow the write token")),
                    None => (rest, ""),
                };
                (v, Some(WriteToken::parse(token)?), suffix)
            }
        };
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("log version is not a number"));
        }
        let version = version.parse::<u32>().map_err(|_| bad("log version is out of range"))?;
        Ok(Self {
            file_id: file_id.to_string(),
            instant: InstantTime::parse(instant)?,
            version,
            write_token: token,
            suffix: suffix.to_string(),
        })
    }

    /// Hudi's `LogFileComparator`: instant, then version, then write token, then suffix.
    pub fn log_order(&self, other: &Self) -> Ordering {
        self.instant
            .cmp(&other.instant)
            .then(self.version.cmp(&other.version))
            .then_with(|| self.write_token.cmp(&other.write_token))
            .then_with(|| self.suffix.cmp(&other.suffix))
    }
}

impl fmt::Display for LogFileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, ".{}_{}.log.{}", self.file_id, self.instant, self.version)?;
        if let Some(t) = &self.write_token {
            write!(f, "_{t}")?;
        }
        f.write_str(&self.suffix)
    }
}

/// The file id of bucket `bucket` under non-blocking concurrency control.
pub fn nbcc_file_id(bucket: u32) -> String {
    format!("{bucket:08}-0000-0000-0000-000000000000-0")
}

/// The bucket number encoded in a bucket-index file id (its first 8 digits).
pub fn bucket_of_file_id(file_id: &str) -> Option<u32> {
    file_id.get(..8).filter(|p| p.bytes().all(|b| b.is_ascii_digit()))?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_corpus_names() {
        let b = BaseFileName::parse("6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_0-1112-3190_20251220210129235.parquet")
            .unwrap();
        assert_eq!(b.file_id, "6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0");
        assert_eq!(b.write_token.as_str(), "0-1112-3190");
        assert_eq!(b.instant.as_str(), "20251220210129235");
        let l =
            LogFileName::parse(".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210130911.log.1_0-1139-3316").unwrap();
        assert_eq!(l.file_id, "8aa68f7e-afd6-4c94-b86c-8a886552e08d-0");
        assert_eq!((l.version, l.write_token.unwrap().as_str()), (1, "0-1139-3316"));
        assert_eq!(bucket_of_file_id(&nbcc_file_id(37)), Some(37));
    }

    /// The kind and reason of a parse error.
    fn failure<T: fmt::Debug>(r: Result<T>) -> (&'static str, String) {
        match r {
            Err(Error::InvalidName { kind, reason, .. }) => (kind, reason),
            other => panic!("expected an invalid name, got {other:?}"),
        }
    }

    #[test]
    fn each_parser_rejects_what_is_not_its_kind_and_says_why() {
        let base_name = "6e1d5cc4-c487-487d-abbe-fe9b30b1c0cc-0_0-1112-3190_20251220210129235.parquet";
        let log_name = ".8aa68f7e-afd6-4c94-b86c-8a886552e08d-0_20251220210130911.log.1_0-1139-3316";
        // (name, base parser's failure, log parser's failure)
        let cases = [
            (".hoodie_partition_metadata", ("base file name", "bad extension"), ("log file name", "no `.log.` part")),
            (
                "x.parquet",
                ("base file name", "expected fileId_token_instant"),
                ("log file name", "log file names start with `.`"),
            ),
            (".a_b.log.x_1-2-3", ("base file name", "bad extension"), ("log file name", "log version is not a number")),
            (
                ".a_b.log.1_1-2-3",
                ("base file name", "bad extension"),
                ("instant time", "expected 17 digits (yyyyMMddHHmmssSSS) or legacy 14"),
            ),
            (
                "a_b_c.parquet",
                ("write token", "expected three dash-separated numbers"),
                ("log file name", "log file names start with `.`"),
            ),
            (
                "a_1-2-3_2025.parquet",
                ("instant time", "expected 17 digits (yyyyMMddHHmmssSSS) or legacy 14"),
                ("log file name", "log file names start with `.`"),
            ),
            (
                "a/b_1-2-3_20251220210129235.parquet",
                ("base file name", "bad file id `a/b` (must be non-empty, without `_` or `/`)"),
                ("log file name", "log file names start with `.`"),
            ),
            (log_name, ("base file name", "bad extension"), ("", "")),
            (base_name, ("", ""), ("log file name", "log file names start with `.`")),
        ];
        for (name, base, log) in cases {
            let want = |(kind, reason): (&'static str, &str)| (kind, reason.to_string());
            if base.0.is_empty() {
                assert!(BaseFileName::parse(name).is_ok(), "{name}");
            } else {
                assert_eq!(failure(BaseFileName::parse(name)), want(base), "base file name {name}");
            }
            if log.0.is_empty() {
                assert!(LogFileName::parse(name).is_ok(), "{name}");
            } else {
                assert_eq!(failure(LogFileName::parse(name)), want(log), "log file name {name}");
            }
        }
    }

    #[test]
    fn log_names_are_only_the_form_hudi_writes() {
        let id = "00000000-0000-0000-0000-000000000000-0";
        let ok = |n: &str| LogFileName::parse(n).unwrap_or_else(|e| panic!("{n}: {e}"));
        let cdc = ok(&format!(".{id}_20250101000000000.log.2_0-23-24.cdc"));
        assert_eq!((cdc.version, cdc.suffix.as_str()), (2, ".cdc"));
        assert_eq!(cdc.to_string(), format!(".{id}_20250101000000000.log.2_0-23-24.cdc"));
        let bare = ok(&format!(".{id}_20250101000000000.log.3"));
        assert_eq!((bare.version, bare.write_token, bare.suffix.as_str()), (3, None, ""));
        let cases = [
            // Hadoop's checksum sidecar of a log file.
            (
                format!("..{id}_20250101000000000.log.1_0-23-24.crc"),
                "a file id does not start with `.` (a Hadoop checksum file?)",
            ),
            (format!(".{id}_20250101000000000.log.1_0-23-24.crc"), "only `.cdc` may follow the write token"),
            (format!(".{id}_20250101000000000.log.1_0-23-24.cdc.crc"), "only `.cdc` may follow the write token"),
            (format!(".{id}_20250101000000000.log.1.cdc"), "log version is not a number"),
            (format!(".{id}_20250101000000000.log.1x_0-1-2"), "log version is not a number"),
            (format!(".{id}_20250101000000000.log._0-1-2"), "log version is not a number"),
            (format!(".{id}_20250101000000000.log.+1_0-1-2"), "log version is not a number"),
            (format!(".{id}_20250101000000000.log.99999999999_0-1-2"), "log version is out of range"),
        ];
        for (name, reason) in cases {
            assert_eq!(failure(LogFileName::parse(&name)), ("log file name", reason.to_string()), "{name}");
        }
        assert_eq!(
            failure(LogFileName::parse(&format!(".{id}_20250101000000000.log.1_0-1-2x"))).0,
            "write token",
            "a token with a tail is not a token"
        );
    }

    proptest! {
        #[test]
        fn names_round_trip(bucket in 0u32..100_000, ms in 0i64..253_402_300_799_000, v in 1u32..1000,
                            a in 0u64..10_000, b in 0u64..10_000, c in 0u64..10_000) {
            let t = InstantTime::from_millis(ms).unwrap();
            let base = BaseFileName { file_id: nbcc_file_id(bucket), write_token: WriteToken::new(a, b, c), instant: t.clone(), extension: "parquet".into() };
            prop_assert_eq!(BaseFileName::parse(&base.to_string()).unwrap(), base);
            let log = LogFileName { file_id: nbcc_file_id(bucket), instant: t, version: v, write_token: Some(WriteToken::new(a, b, c)), suffix: String::new() };
            prop_assert_eq!(LogFileName::parse(&log.to_string()).unwrap(), log);
        }
    }
}
