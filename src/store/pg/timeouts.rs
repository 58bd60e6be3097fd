//! How long anything may wait: the server's `lock_timeout`, `statement_timeout` and
//! `idle_in_transaction_session_timeout`, set with `SET LOCAL` at the start of every
//! transaction (PgBouncer in transaction pooling ignores the startup `options`, and a
//! session `SET` would leak into other clients' transactions on a shared server
//! connection), and the message a timeout ends a command with. Plain reads outside a unit
//! of work get them too: they run in a reading transaction that the schema version check,
//! every command's first round trip, begins (`PgStore::conn` in `mod.rs`).
//!
//! Each is settable as libpq would take it, in the connection string's `options` (or
//! `PGOPTIONS`): `options='-c lock_timeout=5s -c statement_timeout=1min'`. Those settings are
//! taken out of `options` before it goes to the server; the rest goes as given. A zero
//! (PostgreSQL's "no timeout") is refused: every wait stays bounded.

/// The settings and their defaults: a few tens of seconds, longer than any claim, release or
/// `apply` takes on a healthy server, short enough that a stuck command says so.
const SETTINGS: &[(&str, &str)] = &[
    ("lock_timeout", "20s"),
    ("statement_timeout", "30s"),
    ("idle_in_transaction_session_timeout", "30s"),
];

/// The timeouts of a connection's transactions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// (setting, value), in [`SETTINGS`]' order.
    values: Vec<(&'static str, String)>,
}

impl Timeouts {
    /// The timeouts `options` sets (the defaults for the rest), and `options` without them
    /// (`None` when nothing is left). A value that is not a PostgreSQL duration (digits and
    /// an optional unit `ms`, `s`, `min`, `h`, `d`) is refused, naming the setting.
    pub fn from_options(options: Option<&str>) -> Result<(Timeouts, Option<String>), String> {
        let mut values: Vec<(&'static str, String)> =
            SETTINGS.iter().map(|&(k, v)| (k, v.to_owned())).collect();
        let mut rest = Vec::new();
        let mut words = options.unwrap_or("").split_whitespace().peekable();
        while let Some(word) = words.next() {
            // `-c key=value`, `-ckey=value` or `--key=value`.
            let setting = match word {
                "-c" => words.peek().copied().map(|s| (s, true)),
                w => w
                    .strip_prefix("-c")
                    .or_else(|| w.strip_prefix("--"))
                    .map(|s| (s, false)),
            };
            let ours = setting.and_then(|(s, takes_next)| {
                let (k, v) = s.split_once('=')?;
                let k = k.replace('-', "_");
                let slot = values.iter_mut().find(|(name, _)| *name == k)?;
                Some((slot, v.to_owned(), takes_next))
            });
            match ours {
                Some((slot, value, takes_next)) => {
                    if !is_duration(&value) {
                        return Err(format!(
                            "`{}` in `options` is not a duration (like 500ms, 20s, 2min)",
                            slot.0
                        ));
                    }
                    if value
                        .chars()
                        .take_while(char::is_ascii_digit)
                        .all(|c| c == '0')
                    {
                        // PostgreSQL's 0 turns the timeout off: a wait with no end.
                        return Err(format!(
                            "`{}` in `options` is {value}, which PostgreSQL takes as no timeout at all: every wait would be unbounded; give a duration (like 500ms, 20s, 2min)",
                            slot.0
                        ));
                    }
                    slot.1 = value;
                    if takes_next {
                        words.next();
                    }
                }
                None => rest.push(word),
            }
        }
        let rest = (!rest.is_empty()).then(|| rest.join(" "));
        Ok((Timeouts { values }, rest))
    }

    /// The statements that set them for the current transaction, to follow `BEGIN` in the
    /// same simple query (no round trip of their own).
    pub fn set_local(&self) -> String {
        self.values
            .iter()
            .map(|(k, v)| format!("; SET LOCAL {k} = '{v}'"))
            .collect()
    }

    /// The value of one setting.
    fn get(&self, key: &str) -> &str {
        self.values
            .iter()
            .find(|(k, _)| *k == key)
            .map_or("", |(_, v)| v.as_str())
    }

    /// What a server error says when it is one of these timeouts expiring: what the command
    /// waited for, how long, and how to change it.
    pub fn expired(&self, sqlstate: &str, message: &str) -> Option<String> {
        let (what, key) = match sqlstate {
            "55P03" => (
                "a lock another transaction holds (a pool's row, locked by `apply`, `pool delete`, `vpc delete` or a session in psql; or a table, locked by `LOCK TABLE` or a schema change)",
                "lock_timeout",
            ),
            "57014" if message.contains("statement timeout") => {
                ("a statement to finish", "statement_timeout")
            }
            "25P03" => (
                "the next statement of its own transaction, and the server ended the session",
                "idle_in_transaction_session_timeout",
            ),
            _ => return None,
        };
        Some(format!(
            "gave up after {} waiting for {what} ({key}; set it with `options=-c {key}=…` in the connection string)",
            self.get(key)
        ))
    }
}

/// Is `v` a PostgreSQL duration: digits, then optionally `ms`, `s`, `min`, `h` or `d`?
fn is_duration(v: &str) -> bool {
    let digits = v.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && ["", "ms", "s", "min", "h", "d"].contains(&&v[digits..])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_set_timeouts_and_keep_the_rest() {
        let (t, rest) = Timeouts::from_options(Some(
            "-c lock_timeout=5s -c search_path=x --statement-timeout=1min",
        ))
        .unwrap();
        assert_eq!(rest.as_deref(), Some("-c search_path=x"));
        assert_eq!(t.get("lock_timeout"), "5s");
        assert_eq!(t.get("statement_timeout"), "1min");
        assert_eq!(t.get("idle_in_transaction_session_timeout"), "30s");
        assert!(t.set_local().contains("SET LOCAL lock_timeout = '5s'"));
        let (_, rest) = Timeouts::from_options(Some("-clock_timeout=1s")).unwrap();
        assert_eq!(rest, None);
        assert!(Timeouts::from_options(Some("-c lock_timeout=5s';DROP")).is_err());
        for zero in ["0", "00", "0ms", "0s", "0min"] {
            let options = format!("-c statement_timeout={zero}");
            let refused = Timeouts::from_options(Some(&options)).unwrap_err();
            assert!(refused.contains("no timeout at all"), "{zero}: {refused}");
        }
        assert!(Timeouts::from_options(Some("-c lock_timeout=10ms")).is_ok());
    }
}
