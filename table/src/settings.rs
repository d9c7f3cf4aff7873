//! A table's settings: plain serde data with documented defaults, kept
//! apart from the components (clock, locks, spill store) a
//! [`TableBuilder`](crate::TableBuilder) injects.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tributary_timeline::{LeaseSettings, TimeMode};

/// How writers of a table take instants. Part of [`TableSettings`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeSettings {
    /// Generator mode. By default (`None`) the mode the table records
    /// ([`CreateOptions::time_mode`](crate::CreateOptions::time_mode),
    /// `tributary.time.mode` in `hoodie.properties`), or
    /// [`TimeMode::WaitForSkew`] (Hudi's algorithm) for a table that records
    /// none, as one another engine made. In serde form `"wait-for-skew"` or
    /// `"hybrid-logical"`, or absent.
    #[serde(with = "time_mode_serde", skip_serializing_if = "Option::is_none")]
    pub mode: Option<TimeMode>,
    /// Maximum clock skew between any two writers; by default 200 ms
    /// ([`tributary_timeline::DEFAULT_MAX_CLOCK_SKEW`]). In serde form
    /// `max_clock_skew_ms`.
    #[serde(rename = "max_clock_skew_ms", with = "millis_serde")]
    pub max_clock_skew: Duration,
}

impl Default for TimeSettings {
    fn default() -> Self {
        Self { mode: None, max_clock_skew: tributary_timeline::DEFAULT_MAX_CLOCK_SKEW }
    }
}

/// Which lock serialises a table's instants (and, beside it, its
/// compactors), unless one is injected with [`TableBuilder::with_lock`](crate::TableBuilder::with_lock) or
/// [`TableBuilder::with_compaction_lock`](crate::TableBuilder::with_compaction_lock). In serde form kebab-case
/// (`"auto"`, `"file"`, `"lease"`, `"in-process"`, `"hudi-file"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum LockKind {
    /// [`LockKind::File`] for a table in a local folder, [`LockKind::Lease`]
    /// otherwise.
    #[default]
    Auto,
    /// An OS file lock under the table's `.hoodie/.aux/`: the processes of
    /// one host. Only for a table in a local folder.
    File,
    /// A lease document under the table's `.hoodie/.locks/` (the instant
    /// lock is `table_lock.json`, as Hudi's storage-based lock), taken and
    /// renewed with conditional puts: processes anywhere sharing the store.
    /// The store must support conditional puts (S3, GCS, Azure, memory).
    Lease,
    /// A lock of this process alone: for tests, and tables no other process
    /// writes.
    InProcess,
    /// The lock file of Hudi's `FileSystemBasedLockProvider`
    /// (`<table>/.hoodie/lock`, present while held): for a table that Hudi's
    /// Java writers configured with that provider share
    /// ([`TableSettings::hudi_lock_expire`] is its expiry). Instants use
    /// the wait-for-skew mode, as Hudi's do (the file keeps no last issued
    /// time, and taking an instant in the hybrid-logical mode under it
    /// fails); see `docs/interop.md`.
    HudiFile,
}

/// A table's settings: plain data, apart from the components (clock,
/// locks, spill store) given to the [`TableBuilder`](crate::TableBuilder). Every field has a
/// documented default, so a partial serde document (say JSON) is enough; an
/// unknown key is an error. Durations are whole milliseconds in serde form,
/// under the field name plus `_ms`.
///
/// ```
/// let settings: tributary_table::TableSettings =
///     serde_json::from_str(r#"{"time": {"mode": "hybrid-logical"}, "lock": "in-process"}"#).unwrap();
/// assert_eq!(settings.time.max_clock_skew, std::time::Duration::from_millis(200));
/// assert!(serde_json::from_str::<tributary_table::TableSettings>(r#"{"lokc": "file"}"#).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TableSettings {
    /// How instants are taken; see [`TimeSettings`].
    pub time: TimeSettings,
    /// Which lock is built when none is injected; by default
    /// [`LockKind::Auto`].
    pub lock: LockKind,
    /// How long a lease of the instant lock lasts unless renewed
    /// ([`LockKind::Lease`]); a dead holder blocks others at most this long
    /// (plus 500 ms for clock drift). Default 60 s.
    #[serde(rename = "lock_lease_ms", with = "millis_serde")]
    pub lock_lease: Duration,
    /// How long a lease of the compaction lock lasts unless renewed
    /// ([`LockKind::Lease`]). A compactor holds it for a whole compaction
    /// and renews it as it works. Default 60 s.
    #[serde(rename = "compaction_lease_ms", with = "millis_serde")]
    pub compaction_lease: Duration,
    /// How often a holder renews a lease; below half of each lease. Default
    /// 10 s.
    #[serde(rename = "lock_renew_interval_ms", with = "millis_serde")]
    pub lock_renew_interval: Duration,
    /// [`LockKind::HudiFile`]: a lock file older than this (by its
    /// modification time) was left by a dead holder and is deleted, as
    /// Hudi's `hoodie.write.lock.filesystem.expire` (minutes) does; set both
    /// sides alike. Zero, the default as in Hudi: never.
    #[serde(rename = "hudi_lock_expire_ms", with = "millis_serde")]
    pub hudi_lock_expire: Duration,
    /// Give up taking a lease lock after this long. Default 120 s.
    #[serde(rename = "lock_acquire_timeout_ms", with = "millis_serde")]
    pub lock_acquire_timeout: Duration,
    /// The owner named in lease documents; it must be unique among the
    /// processes sharing the table. Default `pid-<process id>`.
    pub lock_owner: Option<String>,
    /// A pending write whose heartbeat is older than this has failed: the
    /// cleaner and the compactor roll it back. Writers of the table must
    /// refresh their heartbeat more often (`WriteSettings::heartbeat_interval`,
    /// checked by [`Table::write_client`](crate::Table::write_client)). Default 2 min
    /// ([`tributary_timeline::DEFAULT_HEARTBEAT_EXPIRY`]).
    #[serde(rename = "heartbeat_expiry_ms", with = "millis_serde")]
    pub heartbeat_expiry: Duration,
    /// The local folder compactors spill under, unless a spill store is
    /// injected with [`TableBuilder::with_spill_store`](crate::TableBuilder::with_spill_store):
    /// in a subfolder per table (its folder name and a checksum of its
    /// location), so tables may share it. Default: the table's
    /// `.hoodie/.temp/` for a table in a local folder, that subfolder of
    /// `<system temporary folder>/tributary-spill` for any other.
    pub spill_dir: Option<std::path::PathBuf>,
}

impl Default for TableSettings {
    fn default() -> Self {
        let lease = LeaseSettings::default();
        Self {
            time: TimeSettings::default(),
            lock: LockKind::Auto,
            lock_lease: lease.lease,
            compaction_lease: lease.lease,
            lock_renew_interval: lease.renew_interval,
            hudi_lock_expire: Duration::ZERO,
            lock_acquire_timeout: lease.acquire_timeout,
            lock_owner: None,
            heartbeat_expiry: tributary_timeline::DEFAULT_HEARTBEAT_EXPIRY,
            spill_dir: None,
        }
    }
}

/// A [`Duration`] as whole milliseconds.
mod millis_serde {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_millis)
    }
}

/// An optional [`TimeMode`] as `"wait-for-skew"` or `"hybrid-logical"`.
mod time_mode_serde {
    use serde::{Deserialize, Deserializer, Serializer};
    use tributary_timeline::TimeMode;

    pub(super) fn serialize<S: Serializer>(mode: &Option<TimeMode>, s: S) -> Result<S::Ok, S::Error> {
        match mode {
            Some(m) => s.serialize_str(m.name()),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<TimeMode>, D::Error> {
        let Some(s) = Option::<String>::deserialize(d)? else { return Ok(None) };
        TimeMode::parse(&s).map(Some).ok_or_else(|| {
            serde::de::Error::invalid_value(serde::de::Unexpected::Str(&s), &"\"wait-for-skew\" or \"hybrid-logical\"")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_round_trip_with_durations_in_milliseconds() {
        let settings = TableSettings {
            time: TimeSettings { mode: Some(TimeMode::HybridLogical), max_clock_skew: Duration::from_millis(50) },
            lock: LockKind::InProcess,
            lock_owner: Some("host-a".into()),
            ..Default::default()
        };
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json["time"]["mode"], "hybrid-logical");
        assert_eq!(json["time"]["max_clock_skew_ms"], 50);
        assert_eq!(json["lock"], "in-process");
        assert_eq!(json["heartbeat_expiry_ms"], 120_000);
        assert_eq!(serde_json::from_value::<TableSettings>(json).unwrap(), settings);
        assert_eq!(serde_json::from_str::<TableSettings>("{}").unwrap(), TableSettings::default());
        let bad = serde_json::from_str::<TableSettings>(r#"{"time": {"mode": "fast"}}"#).unwrap_err().to_string();
        assert!(bad.contains("wait-for-skew"), "{bad}");
    }
}
