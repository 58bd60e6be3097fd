//! [`Timestamp`]: an RFC 3339 UTC instant, as `creationTimestamp` writes it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An instant with second precision, written as RFC 3339 in UTC (`2026-12-01T07:00:00Z`),
/// the form Kubernetes writes `metadata.creationTimestamp` in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp(std::time::SystemTime);

impl Timestamp {
    /// Now, truncated to the second.
    pub fn now() -> Timestamp {
        Timestamp::truncated(std::time::SystemTime::now())
    }

    /// `at`, truncated to the second (the precision the text form keeps).
    pub fn truncated(at: std::time::SystemTime) -> Timestamp {
        let since = at
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        Timestamp(std::time::UNIX_EPOCH + std::time::Duration::from_secs(since))
    }

    /// Parses RFC 3339 in UTC (`Z`), as written; the error names the value.
    pub fn parse(s: &str) -> Result<Timestamp, String> {
        humantime::parse_rfc3339(s).map(Timestamp).map_err(|e| {
            format!(
                "invalid time `{}`: {e}; expected RFC 3339 in UTC, e.g. `2026-12-01T07:00:00Z`",
                s.escape_debug()
            )
        })
    }

    /// The instant.
    pub fn time(self) -> std::time::SystemTime {
        self.0
    }

    /// Seconds since the epoch (0 for an instant before it, which no claim makes).
    pub fn secs(self) -> u64 {
        self.0
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    /// `d` after this instant, truncated to the second.
    pub fn after(self, d: std::time::Duration) -> Timestamp {
        Timestamp::truncated(self.0 + d)
    }

    /// The instant `secs` seconds after the epoch.
    pub fn from_secs(secs: u64) -> Timestamp {
        Timestamp(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
    }
}

impl TryFrom<String> for Timestamp {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        Timestamp::parse(&s)
    }
}

impl From<Timestamp> for String {
    fn from(t: Timestamp) -> String {
        t.to_string()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_seconds(self.0))
    }
}
