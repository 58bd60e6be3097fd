//! Connection strings as libpq reads them: a `postgres://`/`postgresql://` URL or
//! `key=value` pairs, completed from the `PG*` environment and the password file, and
//! masked for every message. Nothing here ever puts a password into a string meant for a
//! human: errors name keys, never the password's value.

mod parse;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::store::pg::conninfo::parse::{
    KEYWORDS, libpq_keyword, parse_pairs, parse_url, percent_decode,
};

/// What stands in for a password in anything shown.
pub const MASK: &str = "****";

/// A parsed connection string: libpq keyword to value. Its `Debug` hides the password.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ConnInfo {
    params: BTreeMap<String, String>,
}

impl std::fmt::Debug for ConnInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConnInfo({})", self.describe())
    }
}

/// Does `store` name a PostgreSQL database (a URL of that scheme, or libpq `key=value`s)?
pub fn is_postgres(store: &str) -> bool {
    let s = store.trim_start();
    s.starts_with("postgres://") || s.starts_with("postgresql://") || looks_like_pairs(s)
}

fn looks_like_pairs(s: &str) -> bool {
    let key: String = s
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    !key.is_empty()
        && s[key.len()..].trim_start().starts_with('=')
        && KEYWORDS.iter().any(|(k, _)| *k == key)
}

/// Is `key` (percent-decoded, any case, punctuation ignored) the password's keyword or
/// something a hand could have meant by it: `PASSWORD`, `pasword`, `passwd`, `pwd`,
/// `pass%77ord`? Its value is never shown.
pub fn is_secret_key(key: &str) -> bool {
    let decoded = percent_decode(key, "key").unwrap_or_else(|_| key.to_owned());
    let k: String = decoded
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    k.contains("pas")
        || k.contains("pw")
        || k.contains("secret")
        || k.contains("word")
        || edit_distance(&k, "password") <= 3
}

/// Levenshtein distance, for [`is_secret_key`]'s misspellings.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

/// What stands in for a value that is not shown because it might hold a password: a
/// value that swallowed another `key=value` (a missing space or quote) or anything that
/// is not plainly a host, port, name or mode.
const NOT_SHOWN: &str = "<not shown>";

/// A value as messages show it: `****` for a password, [`NOT_SHOWN`] for a value that
/// might hold one, else as given (quoted when it needs it).
fn shown_value(key: &str, value: &str) -> String {
    if is_secret_key(key) {
        return MASK.to_owned();
    }
    let plain = value.len() <= 200
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/,:[] ".contains(c))
        && !is_secret_key_like_text(value);
    if plain {
        quote(value)
    } else {
        NOT_SHOWN.to_owned()
    }
}

/// Does free text contain a password marker (`pass`, `pwd`, `secret`)?
fn is_secret_key_like_text(text: &str) -> bool {
    let t = text.to_ascii_lowercase();
    ["pass", "pwd", "secret"].iter().any(|m| t.contains(m))
}

/// `store` as messages may show it: the connection it names as libpq `key=value` pairs,
/// the password as `****` (whatever key spelled it) and any value that might hold one as
/// `<not shown>`. A string that does not parse is not shown at all: what stands in says
/// so.
pub fn mask(store: &str) -> String {
    match ConnInfo::parse_raw(store) {
        Ok(pairs) => {
            let mut seen = std::collections::BTreeSet::new();
            pairs
                .iter()
                .rev()
                .filter(|(k, _)| seen.insert(k.clone()))
                .map(|(k, v)| {
                    let key = if is_secret_key(k) {
                        "password"
                    } else {
                        k.as_str()
                    };
                    format!("{key}={}", shown_value(k, v))
                })
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join(" ")
        }
        Err(_) => "<the connection string, not shown: it does not parse>".to_owned(),
    }
}

/// Why `store` is not a PostgreSQL connection string, without quoting any of it.
pub fn why_not_postgres(store: &str) -> String {
    let s = store.trim_start().to_ascii_lowercase();
    if s.starts_with("postgres:") || s.starts_with("postgresql:") {
        "it starts with a PostgreSQL scheme but not with `postgres://` or `postgresql://`".into()
    } else if s.contains("://") {
        "its URL scheme is not `postgres://` or `postgresql://`".into()
    } else if s.contains('=') {
        "it does not start with a libpq keyword (`host=`, `dbname=`, …)".into()
    } else {
        "it is neither a `postgresql://` URL nor libpq `key=value` pairs".into()
    }
}

/// Quotes a `key=value` value when it needs it.
fn quote(v: &str) -> String {
    if !v.is_empty() && !v.contains([' ', '\'', '\\', '\t', '\n']) {
        return v.to_owned();
    }
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

impl ConnInfo {
    /// The `key=value` pairs of a URL or `key=value` connection string, unchecked.
    fn parse_raw(store: &str) -> Result<Vec<(String, String)>, String> {
        let s = store.trim();
        match s
            .strip_prefix("postgresql://")
            .or_else(|| s.strip_prefix("postgres://"))
        {
            Some(rest) => parse_url(rest),
            None => parse_pairs(s),
        }
    }

    /// Parses a URL or `key=value` connection string. Unknown keywords are refused, as libpq
    /// refuses them; a keyword that is not libpq's is not named (it may be a password that
    /// lost its `password=`), nor is a value that swallowed another pair.
    pub fn parse(store: &str) -> Result<ConnInfo, String> {
        let mut params = BTreeMap::new();
        for (k, v) in Self::parse_raw(store)? {
            if !KEYWORDS.iter().any(|(known, _)| *known == k) {
                let named = if is_secret_key(&k) {
                    "a misspelt `password` (its value is not shown)".to_owned()
                } else if libpq_keyword(&k) {
                    format!("`{k}`")
                } else {
                    "one that is not libpq's (not shown: it may be a password)".to_owned()
                };
                return Err(format!(
                    "unsupported connection option: {named}; ipamctl understands {}",
                    KEYWORDS
                        .iter()
                        .map(|(k, _)| *k)
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            }
            let free_text = matches!(k.as_str(), "password" | "options" | "application_name");
            if !free_text && (v.contains('=') || is_secret_key_like_text(&v)) {
                return Err(format!(
                    "the value of `{k}` holds another `key=value` or a password marker (a missing space or quote?); not shown"
                ));
            }
            params.insert(k, v);
        }
        Ok(ConnInfo { params })
    }

    /// Fills every keyword the string left out from its `PG*` variable, as libpq does.
    pub fn with_env(mut self, env: impl Fn(&str) -> Option<String>) -> ConnInfo {
        for (key, var) in KEYWORDS {
            if let Some(var) = var
                && !self.params.contains_key(*key)
                && let Some(v) = env(var).filter(|v| !v.is_empty())
            {
                self.params.insert((*key).into(), v);
            }
        }
        self
    }

    /// The value of a keyword.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// Sets a keyword (tests use it to point at a fresh database).
    pub fn set(&mut self, key: &str, value: &str) {
        self.params.insert(key.into(), value.into());
    }

    /// The connection as `host=… port=… dbname=… user=…`, never with the password.
    pub fn describe(&self) -> String {
        self.params
            .iter()
            .filter(|(k, _)| k.as_str() != "password")
            .map(|(k, v)| format!("{k}={}", shown_value(k, v)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Fills in libpq's defaults (socket directory, port 5432, the OS user, a database of
    /// the user's name) where nothing was given.
    pub fn with_defaults(mut self, os_user: &str) -> ConnInfo {
        if !self.params.contains_key("host") && !self.params.contains_key("hostaddr") {
            let dir = ["/var/run/postgresql", "/tmp"]
                .into_iter()
                .find(|d| Path::new(d).is_dir())
                .unwrap_or("/tmp");
            self.params.insert("host".into(), dir.into());
        }
        self.params
            .entry("port".into())
            .or_insert_with(|| "5432".into());
        self.params
            .entry("user".into())
            .or_insert_with(|| os_user.into());
        let user = self.params["user"].clone();
        self.params.entry("dbname".into()).or_insert(user);
        self
    }

    /// The password: given, or found in the password file (`passfile`, else
    /// `~/.pgpass`) for this host, port, database and user. A password file that others may
    /// read is ignored, as libpq does; [`ConnInfo::password_lookup`] also says so.
    pub fn password(&self, home: Option<&Path>) -> Option<String> {
        self.password_lookup(home).password
    }

    /// [`ConnInfo::password`], and the warning to show when a password file was ignored
    /// because others may read it (as libpq warns).
    pub fn password_lookup(&self, home: Option<&Path>) -> PasswordLookup {
        if let Some(p) = self.get("password") {
            return PasswordLookup {
                password: Some(p.to_owned()),
                warning: None,
            };
        }
        let file = match self.get("passfile") {
            Some(f) => Some(PathBuf::from(f)),
            None => home.map(|h| h.join(".pgpass")),
        };
        let Some(file) = file else {
            return PasswordLookup::default();
        };
        let Ok(meta) = std::fs::metadata(&file) else {
            return PasswordLookup::default();
        };
        if !meta.is_file() {
            return PasswordLookup::default();
        }
        {
            use std::os::unix::fs::PermissionsExt;
            if meta.permissions().mode() & 0o077 != 0 {
                return PasswordLookup {
                    password: None,
                    warning: Some(format!(
                        "password file {} has group or world access; permissions should be u=rw (0600) or less",
                        file.display()
                    )),
                };
            }
        }
        PasswordLookup {
            password: self.password_in(&file),
            warning: None,
        }
    }

    /// The password `file` holds for this host, port, database and user, if any.
    fn password_in(&self, file: &Path) -> Option<String> {
        let text = std::fs::read_to_string(file).ok()?;
        let host = self.get("host").unwrap_or("localhost");
        // A socket directory is looked up as `localhost`, as libpq does for its default one.
        let host = if host.starts_with('/') {
            "localhost"
        } else {
            host
        };
        let want = [
            host,
            self.get("port").unwrap_or("5432"),
            self.get("dbname").unwrap_or(""),
            self.get("user").unwrap_or(""),
        ];
        text.lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .filter_map(pgpass_fields)
            .find(|f| {
                f[..4]
                    .iter()
                    .zip(want)
                    .all(|(field, want)| field == "*" || field == want)
            })
            .map(|f| f[4].clone())
    }
}

/// What [`ConnInfo::password_lookup`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PasswordLookup {
    /// The password, if one was given or found.
    pub password: Option<String>,
    /// Why a password file was ignored, as the line after `warning: ` reads.
    pub warning: Option<String>,
}

/// The five `:`-separated fields of a password file line (`\:` and `\\` escaped).
fn pgpass_fields(line: &str) -> Option<[String; 5]> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => fields.last_mut()?.push(chars.next()?),
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut()?.push(c),
        }
    }
    fields.try_into().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "s3cr3t:p@ss";

    #[test]
    fn url_with_socket_host_and_params() {
        let c = ConnInfo::parse(
            "postgresql://alice:s3cr3t%3Ap%40ss@%2Ftmp%2Fpg:5433/ipam?sslmode=require&application_name=x",
        )
        .unwrap();
        assert_eq!(c.get("host"), Some("/tmp/pg"));
        assert_eq!(c.get("port"), Some("5433"));
        assert_eq!(c.get("user"), Some("alice"));
        assert_eq!(c.get("password"), Some(SECRET));
        assert_eq!(c.get("dbname"), Some("ipam"));
        assert_eq!(c.get("sslmode"), Some("require"));
        assert!(!c.describe().contains("s3cr3t"));
        assert!(!format!("{c:?}").contains("s3cr3t"));
    }

    #[test]
    fn url_query_host_and_empty_authority() {
        let c = ConnInfo::parse("postgresql:///postgres?host=/tmp/x&port=5544&user=u").unwrap();
        assert_eq!(c.get("host"), Some("/tmp/x"));
        assert_eq!(c.get("port"), Some("5544"));
        assert_eq!(c.get("dbname"), Some("postgres"));
    }

    #[test]
    fn pairs_with_quotes_and_spaces() {
        let c = ConnInfo::parse("host=/run/pg  port = 5432 password='a b\\'c' dbname=x").unwrap();
        assert_eq!(c.get("password"), Some("a b'c"));
        assert_eq!(c.get("port"), Some("5432"));
        assert!(is_postgres("host=/run/pg dbname=x"));
        assert!(!is_postgres("./state"));
        assert!(!is_postgres("foo=bar"));
    }

    #[test]
    fn unknown_option_is_refused_without_echoing_values() {
        let e = ConnInfo::parse("postgresql://u:hunter2@h/db?sslcert=x").unwrap_err();
        assert!(e.contains("sslcert") && !e.contains("hunter2"));
        let e = ConnInfo::parse("postgresql://u:hunter2%zz@h/db").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
        for s in [
            "host=h hunter2",
            "host=h hunter2=x",
            "host=h passwordhunter2",
            "host=hpassword=hunter2",
            "postgresql://u:hun/ter2@h/db",
            "postgresql://u:hunter2h:1/db",
            "postgresql://u:hunter2@h:1x/db",
            "postgresql://h/db?hunter2",
        ] {
            let e = ConnInfo::parse(s).unwrap_err();
            assert!(!e.contains("hunter2") && !e.contains("ter2"), "{s}: {e}");
        }
    }

    #[test]
    fn mask_hides_passwords_in_every_form() {
        for s in [
            "postgresql://alice:hunter2@db.example:5432/ipam",
            "postgres://alice:hunter2@db/ipam?sslmode=require",
            "postgresql://db/ipam?password=hunter2&sslmode=require",
            "host=db password=hunter2 dbname=ipam",
            "host=db password='hunter2 x' dbname=ipam",
        ] {
            let m = mask(s);
            assert!(!m.contains("hunter2"), "{s} -> {m}");
            assert!(m.contains(MASK), "{s} -> {m}");
        }
        for s in ["host=db password='hunter2", "mysql://alice:hunter2@db/x"] {
            assert!(!mask(s).contains("hunter2"), "{s} -> {}", mask(s));
        }
        assert_eq!(
            mask("postgresql://alice:hunter2@db:5432/ipam"),
            "user=alice password=**** host=db port=5432 dbname=ipam"
        );
        for s in [
            "host=db pass%77ord=hunter2",
            "postgresql://db/ipam?pass%77ord=hunter2",
            "host=db PASSWORD=hunter2",
            "host=db pwd=hunter2",
            "ipam:hunter2@db/x",
            "host=dbpassword=hunter2",
        ] {
            assert!(!mask(s).contains("hunter2"), "{s} -> {}", mask(s));
        }
    }

    #[test]
    fn env_fills_only_what_is_missing() {
        let c = ConnInfo::parse("host=/a")
            .unwrap()
            .with_env(|v| match v {
                "PGHOST" => Some("/b".into()),
                "PGPASSWORD" => Some("pw".into()),
                _ => None,
            })
            .with_defaults("me");
        assert_eq!(c.get("host"), Some("/a"));
        assert_eq!(c.get("password"), Some("pw"));
        assert_eq!(c.get("user"), Some("me"));
        assert_eq!(c.get("dbname"), Some("me"));
    }

    #[test]
    fn password_file_matches_with_wildcards_and_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(
            &file,
            "# comment\nother:*:*:*:no\nlocalhost:5433:*:alice:pa\\:ss\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let mut c = ConnInfo::parse("host=/tmp/sock port=5433 user=alice dbname=x").unwrap();
        c.set("passfile", file.to_str().unwrap());
        assert_eq!(c.password(None).as_deref(), Some("pa:ss"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(c.password(None), None);
    }
}
