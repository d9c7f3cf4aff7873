//! Instant times, actions, states and the timeline file names of layout 2.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, NaiveDateTime, TimeZone, Utc};

use crate::error::{Error, Result};

/// A Hudi instant time: `yyyyMMddHHmmssSSS` (17 digits, UTC), or a legacy
/// 14-digit `yyyyMMddHHmmss`. Instants are compared as strings, as Hudi does.
///
/// The digits are held inline, not on the heap: timelines and file names
/// hold thousands of instants, copied as views are built. A legacy instant
/// is padded with zero bytes, which sort before every digit, so comparing
/// the padded digits compares the strings.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct InstantTime {
    digits: [u8; 17],
    len: u8,
}

impl Ord for InstantTime {
    /// The digits' order, compared as two integers rather than byte by
    /// byte: views sort thousands of instants. (Equal digits are equal
    /// lengths: a padding zero byte is never a digit.)
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order_key().cmp(&other.order_key())
    }
}

impl PartialOrd for InstantTime {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl InstantTime {
    /// `00000000000000000`: before every instant, an open lower bound.
    pub const EARLIEST: InstantTime = InstantTime { digits: [b'0'; 17], len: 17 };
    /// `99999999999999999`: after every instant, an open upper bound.
    pub const LATEST: InstantTime = InstantTime { digits: [b'9'; 17], len: 17 };

    /// Formats epoch milliseconds (UTC) as a 17-digit instant time.
    pub fn from_millis(millis: i64) -> Result<Self> {
        let dt = DateTime::<Utc>::from_timestamp_millis(millis).ok_or_else(|| Error::InvalidName {
            kind: "instant time",
            name: millis.to_string(),
            reason: "milliseconds out of range".into(),
        })?;
        let s = dt.format("%Y%m%d%H%M%S%3f").to_string();
        if s.len() != 17 {
            return Err(Error::InvalidName {
                kind: "instant time",
                name: s,
                reason: "year outside 1000..=9999".into(),
            });
        }
        Self::parse(&s)
    }

    /// Parses 17 (or legacy 14) ASCII digits.
    pub fn parse(s: &str) -> Result<Self> {
        let bad =
            |reason: &str| Error::InvalidName { kind: "instant time", name: s.to_string(), reason: reason.to_string() };
        if !(s.len() == 17 || s.len() == 14) {
            return Err(bad("expected 17 digits (yyyyMMddHHmmssSSS) or legacy 14"));
        }
        if !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("expected only digits"));
        }
        let mut digits = [0; 17];
        digits[..s.len()].copy_from_slice(s.as_bytes());
        Ok(Self { digits, len: s.len() as u8 })
    }

    /// Milliseconds since the epoch, reading the time as UTC. `None` for
    /// pseudo-instants such as `00000000000000000` that are not real dates.
    pub fn to_millis(&self) -> Option<i64> {
        let s = self.as_str();
        let (secs, millis) = if s.len() == 17 { (&s[..14], s[14..].parse::<i64>().ok()?) } else { (s, 0) };
        let naive = NaiveDateTime::parse_from_str(secs, "%Y%m%d%H%M%S").ok()?;
        Some(Utc.from_utc_datetime(&naive).timestamp_millis() + millis)
    }

    /// The digits as integers that order as the digits do: the first 16
    /// bytes big-endian, then the 17th.
    fn order_key(&self) -> (u128, u8) {
        let mut head = [0; 16];
        head.copy_from_slice(&self.digits[..16]);
        (u128::from_be_bytes(head), self.digits[16])
    }

    /// The digits.
    pub fn as_str(&self) -> &str {
        // ASCII digits only (`parse`), so always UTF-8.
        std::str::from_utf8(&self.digits[..usize::from(self.len)]).unwrap_or_default()
    }
}

impl fmt::Display for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for InstantTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "InstantTime({})", self.as_str())
    }
}

impl FromStr for InstantTime {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Self::parse(s)
    }
}

/// The kind of operation an instant records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Action {
    /// Log-file append (a Merge-on-Read write). Completes as `deltacommit`.
    DeltaCommit,
    /// Base-file write. Completes as `commit`.
    Commit,
    /// Compaction of log files into a new base file. Completes as `commit`.
    Compaction,
    /// Log compaction. Completes as `deltacommit`.
    LogCompaction,
    /// Rollback of a failed write.
    Rollback,
    /// Removal of old file slices.
    Clean,
    /// Replace commit (insert overwrite, clustering result).
    ReplaceCommit,
    /// Clustering. Completes as `replacecommit`.
    Clustering,
    /// Metadata-table index building.
    Indexing,
    /// Savepoint.
    Savepoint,
    /// Restore to a savepoint.
    Restore,
}

impl Action {
    pub(crate) const ALL: [Action; 11] = [
        Action::DeltaCommit,
        Action::Commit,
        Action::Compaction,
        Action::LogCompaction,
        Action::Rollback,
        Action::Clean,
        Action::ReplaceCommit,
        Action::Clustering,
        Action::Indexing,
        Action::Savepoint,
        Action::Restore,
    ];

    /// The action's name in requested and inflight file names.
    pub fn name(self) -> &'static str {
        match self {
            Action::DeltaCommit => "deltacommit",
            Action::Commit => "commit",
            Action::Compaction => "compaction",
            Action::LogCompaction => "logcompaction",
            Action::Rollback => "rollback",
            Action::Clean => "clean",
            Action::ReplaceCommit => "replacecommit",
            Action::Clustering => "clustering",
            Action::Indexing => "indexing",
            Action::Savepoint => "savepoint",
            Action::Restore => "restore",
        }
    }

    /// The action's name in its completed file name (`compaction` completes as `commit`).
    pub fn completed_name(self) -> &'static str {
        match self {
            Action::Compaction => "commit",
            Action::LogCompaction => "deltacommit",
            Action::Clustering => "replacecommit",
            other => other.name(),
        }
    }

    /// Looks an action up by its requested/inflight name.
    pub fn from_name(name: &str) -> Option<Action> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }

    /// True for actions that write data files readers must see (commits of any kind).
    pub fn writes_data(self) -> bool {
        matches!(
            self,
            Action::DeltaCommit
                | Action::Commit
                | Action::Compaction
                | Action::LogCompaction
                | Action::ReplaceCommit
                | Action::Clustering
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where an instant is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// Planned: `<t>.<action>.requested` exists.
    Requested,
    /// Running: `<t>.<action>.inflight` exists.
    Inflight,
    /// Done and visible: `<t>_<c>.<action>` exists.
    Completed,
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            State::Requested => "REQUESTED",
            State::Inflight => "INFLIGHT",
            State::Completed => "COMPLETED",
        })
    }
}

/// One parsed file of the layout-2 timeline folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimelineFile {
    /// Requested time.
    pub requested: InstantTime,
    /// Action as named in the file. For completed files this is the
    /// completed name (`commit` for a compaction).
    pub action_name: String,
    /// State this file records.
    pub state: State,
    /// Completion time, for completed files.
    pub completed: Option<InstantTime>,
}

impl TimelineFile {
    /// Parses a layout-2 timeline file name.
    pub(crate) fn parse(name: &str) -> Result<Self> {
        let bad = |reason: &str| Error::InvalidName {
            kind: "timeline file name",
            name: name.to_string(),
            reason: reason.to_string(),
        };
        let (stem, rest) = name.split_once('.').ok_or_else(|| bad("no action suffix"))?;
        let (action_name, state) = match rest.rsplit_once('.') {
            Some((a, "requested")) => (a, State::Requested),
            Some((a, "inflight")) => (a, State::Inflight),
            Some(_) => return Err(bad("unknown state suffix")),
            None if rest == "inflight" => ("commit", State::Inflight),
            None if rest == "requested" => return Err(bad("requested file without an action")),
            None => (rest, State::Completed),
        };
        if action_name.is_empty() || !action_name.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(bad("action must be lowercase letters"));
        }
        let (requested, completed) = match (state, stem.split_once('_')) {
            (State::Completed, Some((t, c))) => (InstantTime::parse(t)?, Some(InstantTime::parse(c)?)),
            (State::Completed, None) => {
                return Err(bad("completed file without a completion time (layout 1 name?)"));
            }
            (_, Some(_)) => return Err(bad("only completed files carry a completion time")),
            (_, None) => (InstantTime::parse(stem)?, None),
        };
        Ok(Self { requested, action_name: action_name.to_string(), state, completed })
    }
}

/// One instant of the timeline, in its highest state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Instant {
    /// When it was requested; its identity.
    pub requested: InstantTime,
    /// What it does.
    pub action: Action,
    /// How far it got.
    pub state: State,
    /// When it completed (the `<c>` in `<t>_<c>.<action>`).
    pub completed: Option<InstantTime>,
}

impl Instant {
    /// A requested instant.
    pub fn requested(requested: InstantTime, action: Action) -> Self {
        Self { requested, action, state: State::Requested, completed: None }
    }

    /// True once the completed file exists.
    pub fn is_completed(&self) -> bool {
        self.state == State::Completed
    }

    /// When it became visible: its completion time. Layout-1 instants have
    /// none; their requested time stands in.
    pub fn visible_at(&self) -> &InstantTime {
        self.completed.as_ref().unwrap_or(&self.requested)
    }

    /// The order in which instants became visible: by
    /// [`Instant::visible_at`], then by requested time.
    pub fn cmp_visibility(&self, other: &Instant) -> std::cmp::Ordering {
        self.visible_at().cmp(other.visible_at()).then(self.requested.cmp(&other.requested))
    }

    /// The file name recording this instant in `state` (layout 2).
    ///
    /// For [`State::Completed`] the completion time must be set.
    pub fn file_name(&self, state: State) -> Result<String> {
        let t = &self.requested;
        Ok(match state {
            State::Requested => format!("{t}.{}.requested", self.action.name()),
            State::Inflight if self.action == Action::Commit => format!("{t}.inflight"),
            State::Inflight => format!("{t}.{}.inflight", self.action.name()),
            State::Completed => {
                let c = self.completed.as_ref().ok_or_else(|| Error::InvalidInput {
                    what: format!("instant {t}"),
                    reason: "completed file name needs a completion time".into(),
                })?;
                format!("{t}_{c}.{}", self.action.completed_name())
            }
        })
    }
}

/// The position of the instant requested at `t` in `instants`, sorted by
/// requested time.
pub(crate) fn position(instants: &[Instant], t: &InstantTime) -> Option<usize> {
    instants.binary_search_by(|i| i.requested.cmp(t)).ok()
}

/// The positions in a list of instants of the one that became visible
/// last ([`Instant::cmp_visibility`]), and of the last that writes data.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Latest {
    pub(crate) any: Option<usize>,
    pub(crate) write: Option<usize>,
}

impl Latest {
    /// One pass over `instants`.
    pub(crate) fn of(instants: &[Instant]) -> Self {
        let later = |a: &usize, b: &usize| instants[*a].cmp_visibility(&instants[*b]);
        Self {
            any: (0..instants.len()).max_by(later),
            write: (0..instants.len()).filter(|&n| instants[n].action.writes_data()).max_by(later),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn millis_round_trip() {
        let t = InstantTime::from_millis(1_766_264_468_078).unwrap();
        assert_eq!(t.as_str(), "20251220210108078");
        assert_eq!(t.to_millis(), Some(1_766_264_468_078));
        assert!(InstantTime::parse("2025122021010807").is_err());
        assert!(InstantTime::parse("2025122021010807x").is_err());
        assert_eq!(InstantTime::parse("00000000000000000").unwrap().to_millis(), None);
    }

    #[test]
    fn the_open_bounds_enclose_every_instant() {
        assert_eq!(InstantTime::EARLIEST, InstantTime::parse("00000000000000000").unwrap());
        assert_eq!(InstantTime::LATEST, InstantTime::parse("99999999999999999").unwrap());
        let t = InstantTime::from_millis(1_766_264_468_078).unwrap();
        let legacy = InstantTime::parse("20251220210108").unwrap();
        assert!(InstantTime::EARLIEST < legacy && legacy < t && t < InstantTime::LATEST);
    }

    #[test]
    fn parses_layout2_names() {
        let f = TimelineFile::parse("20251220210129235_20251220210129883.commit").unwrap();
        assert_eq!(f.state, State::Completed);
        assert_eq!(f.completed.unwrap().as_str(), "20251220210129883");
        let f = TimelineFile::parse("20250713010139392.inflight").unwrap();
        assert_eq!((f.action_name.as_str(), f.state), ("commit", State::Inflight));
        let f = TimelineFile::parse("20251220210117766.indexing.requested").unwrap();
        assert_eq!((f.action_name.as_str(), f.state), ("indexing", State::Requested));
        for bad in [
            "history",
            "20251220210108078.deltacommit.done",
            "2025.deltacommit",
            "20251220210108078.deltacommit",
            ".DS_Store",
            "20251220210108078_20251220210109593.deltacommit.inflight",
        ] {
            assert!(TimelineFile::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn file_names_round_trip(t in 0i64..253_402_300_799_000, dc in 0i64..10_000, a in 0usize..11, s in 0usize..3) {
            let action = Action::ALL[a];
            let state = [State::Requested, State::Inflight, State::Completed][s];
            let inst = Instant {
                requested: InstantTime::from_millis(t).unwrap(),
                action,
                state,
                completed: Some(InstantTime::from_millis(t + dc).unwrap()),
            };
            let name = inst.file_name(state).unwrap();
            let parsed = TimelineFile::parse(&name).unwrap();
            prop_assert_eq!(&parsed.requested, &inst.requested);
            prop_assert_eq!(parsed.state, state);
            if state == State::Completed {
                prop_assert_eq!(parsed.action_name.as_str(), action.completed_name());
                prop_assert_eq!(parsed.completed.as_ref(), inst.completed.as_ref());
            } else {
                prop_assert_eq!(parsed.action_name.as_str(), action.name());
            }
            prop_assert_eq!(parsed.requested.to_millis(), Some(t));
        }

        /// Instants, legacy ones among them, compare as their strings do,
        /// and give their digits back.
        #[test]
        fn instants_compare_as_strings(a in "[0-9]{14}([0-9]{3})?", b in "[0-9]{14}([0-9]{3})?", cut in 0usize..17) {
            // Often equal up to a point, so that prefixes and padding meet.
            let b = format!("{}{}", &a[..cut.min(a.len())], &b[cut.min(b.len())..]);
            let b = if b.len() == 14 || b.len() == 17 { b } else { a.clone() };
            let (x, y) = (InstantTime::parse(&a).unwrap(), InstantTime::parse(&b).unwrap());
            prop_assert_eq!(x.cmp(&y), a.cmp(&b));
            prop_assert_eq!(x == y, a == b);
            prop_assert_eq!(x.as_str(), a.as_str());
            prop_assert_eq!(y.to_string(), b);
        }
    }
}
