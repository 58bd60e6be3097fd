//! The server's lines on stderr: one per request (`--log-format text|json`), and what the
//! server says about itself. A line never carries the `Authorization` header, a token's
//! secret, or a connection string (the store is named by nothing here).

use std::io::Write;
use std::time::Duration;

/// `--log-format`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// `key=value` pairs.
    #[default]
    Text,
    /// One JSON object a line.
    Json,
}

/// One request as the log tells it.
pub struct Line<'a> {
    /// The token's name (`-` for none).
    pub token: &'a str,
    /// The GraphQL operation's root fields, or the endpoint.
    pub operation: &'a str,
    /// The namespace the request names (`-` for none).
    pub namespace: &'a str,
    /// `OK`, or the first error's code.
    pub outcome: &'a str,
    pub status: u16,
    pub duration: Duration,
}

/// Writes `line` in `format`.
pub fn request(format: LogFormat, line: &Line<'_>) {
    let time = crate::model::Timestamp::now().to_string();
    let millis = line.duration.as_secs_f64() * 1000.0;
    let text = match format {
        LogFormat::Json => serde_json::json!({
            "time": time,
            "token": line.token,
            "operation": line.operation,
            "namespace": line.namespace,
            "outcome": line.outcome,
            "status": line.status,
            "durationMs": (millis * 1000.0).round() / 1000.0,
        })
        .to_string(),
        LogFormat::Text => format!(
            "time={time} token={} operation={} namespace={} outcome={} status={} duration_ms={millis:.3}",
            quoted(line.token),
            quoted(line.operation),
            quoted(line.namespace),
            line.outcome,
            line.status,
        ),
    };
    say(&text);
}

/// A value of a text line: as it is when it holds no space, quote or control character.
fn quoted(value: &str) -> String {
    if value.is_empty()
        || value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c.is_control())
    {
        format!("{value:?}")
    } else {
        value.to_owned()
    }
}

/// A warning (`warning: …`).
pub fn warning(text: &str) {
    say(&format!("warning: {text}"));
}

/// A line on stderr, whole (a failed write to stderr is not the request's failure).
pub fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}
