//! The `hoodie.properties` text codec: Java properties text to keys and
//! values and back, and the table checksum Hudi stores in it. Reading and
//! changing the file on storage is `properties.rs`.

use std::collections::BTreeMap;

use tributary_format::Memo;

use crate::config::keys;
use crate::error::{Error, Result};

/// CRC32 checksum Hudi stores under `hoodie.table.checksum`.
pub(crate) fn table_checksum(database: Option<&str>, name: &str) -> u32 {
    crc32fast::hash(format!("{}.{}", database.unwrap_or(""), name).as_bytes())
}

/// Reads Java properties text into its keys and values; `path` names the
/// file in errors. The one reader of `hoodie.properties` text. Every open
/// of a table reads the same file, so what a text parses to is kept once
/// per process, keyed by the text (`tributary_format::memo`).
pub(crate) fn parse_properties(text: &str, path: &str) -> Result<BTreeMap<String, String>> {
    static PARSED: Memo<std::result::Result<BTreeMap<String, String>, (usize, String)>> = Memo::new();
    PARSED
        .get_or(text.as_bytes(), || match java_properties::read(text.as_bytes()) {
            Ok(map) => Ok(map.into_iter().collect()),
            Err(e) => Err((e.line_number().unwrap_or(0), e.to_string())),
        })
        .map_err(|(line, reason)| Error::InvalidConfig { path: path.to_string(), key: format!("line {line}"), reason })
}

/// Java properties text of `properties`, in key order, after the comment
/// line `comment` (Java writes `Updated at <time>` there). The one writer of
/// `hoodie.properties` text.
pub(crate) fn render_properties(properties: &BTreeMap<String, String>, comment: &str) -> Result<String> {
    let mut out = Vec::new();
    {
        let mut w = java_properties::PropertiesWriter::new(&mut out);
        let werr = |e: java_properties::PropertiesError| Error::InvalidInput {
            what: "hoodie.properties".into(),
            reason: e.to_string(),
        };
        w.write_comment(comment).map_err(werr)?;
        for (k, v) in properties {
            w.write(k, v).map_err(werr)?;
        }
        w.finish().map_err(werr)?;
    }
    String::from_utf8(out).map_err(|e| Error::InvalidInput { what: "hoodie.properties".into(), reason: e.to_string() })
}

/// What `hoodie.table.checksum` says of a properties file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChecksumState {
    /// The key is absent (Hudi's readers accept such a file).
    Missing,
    /// It matches the table and database names.
    Valid,
    /// It does not match, or is not a number: the file is damaged.
    Invalid,
}

/// Checks `hoodie.table.checksum` of `properties` against its table and
/// database names, as Hudi validates a properties file it reads.
pub(crate) fn checksum_state(properties: &BTreeMap<String, String>) -> ChecksumState {
    let Some(sum) = properties.get(keys::CHECKSUM) else { return ChecksumState::Missing };
    let Some(name) = properties.get(keys::NAME) else { return ChecksumState::Invalid };
    let database = properties.get(keys::DATABASE).map(String::as_str).filter(|d| !d.is_empty());
    match sum.trim().parse::<u64>() {
        Ok(v) if v == u64::from(table_checksum(database, name)) => ChecksumState::Valid,
        _ => ChecksumState::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_matches_hudi() {
        assert_eq!(table_checksum(Some("default"), "v8_trips_8i3u1d"), 1_197_752_875);
    }
}
