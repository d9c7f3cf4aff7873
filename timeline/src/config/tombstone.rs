//! [`TombstoneRetention`]: how long a compaction keeps a deleted key's
//! tombstone (`tributary.tombstone.retention`).

/// How long a tombstone lives: what a compaction keeps of a deleted key so
/// that an older version of it arriving later stays deleted
/// (`docs/design.md`, "Tombstones").
///
/// A bound is measured in event time: a compaction drops a tombstone whose
/// ordering value is more than the bound below the newest ordering value its
/// file group holds. An event later than the bound may bring the row back.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TombstoneRetention {
    /// Tombstones are kept as long as their file group exists (the default).
    #[default]
    Forever,
    /// A lateness bound for ordering fields of type date or timestamp
    /// (`7d`, `12h`); rounded up to whole days for a date field.
    Lateness(std::time::Duration),
    /// A lateness bound in the ordering field's own units, for numeric
    /// ordering fields (int, long, float, double, decimal).
    Amount(f64),
}

impl TombstoneRetention {
    /// Parses `forever`, a duration such as `7d` or `36h`, or a number.
    pub fn parse(s: &str) -> std::result::Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("forever") {
            return Ok(Self::Forever);
        }
        if let Ok(n) = s.parse::<f64>() {
            return if n.is_finite() && n >= 0.0 {
                Ok(Self::Amount(n))
            } else {
                Err(format!("`{s}`: a lateness bound must be a non-negative number"))
            };
        }
        humantime::parse_duration(s)
            .map(Self::Lateness)
            .map_err(|e| format!("`{s}` is not `forever`, a duration (for example `7d` or `12h`) or a number: {e}"))
    }

    /// The config value, which [`TombstoneRetention::parse`] reads back.
    pub fn render(&self) -> String {
        match self {
            Self::Forever => "forever".into(),
            Self::Lateness(d) => humantime::format_duration(*d).to_string().replace(' ', ""),
            Self::Amount(n) => n.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tombstone_retention_parses_and_renders_back() {
        for (text, want) in [
            ("forever", TombstoneRetention::Forever),
            ("7d", TombstoneRetention::Lateness(std::time::Duration::from_secs(7 * 86_400))),
            ("36h", TombstoneRetention::Lateness(std::time::Duration::from_secs(36 * 3_600))),
            ("86400000", TombstoneRetention::Amount(86_400_000.0)),
            ("0.5", TombstoneRetention::Amount(0.5)),
        ] {
            let got = TombstoneRetention::parse(text).unwrap();
            assert_eq!(got, want, "{text}");
            assert_eq!(TombstoneRetention::parse(&got.render()).unwrap(), want, "{text}");
        }
        for bad in ["7 days later", "-1", "soon", ""] {
            let err = TombstoneRetention::parse(bad).unwrap_err();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }
}
