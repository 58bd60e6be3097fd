//! Connection strings as libpq reads them: a `postgres://`/`postgresql://` URL or
//! `key=value` pairs, completed from the `PG*` environment and the password file, and
//! masked for every message. Nothing here ever puts a password into a string meant for a
//! human: errors name keys, never the password's value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The libpq keywords ipamctl understands, with the environment variable of each.
const KEYWORDS: &[(&str, Option<&str>)] = &[
    ("host", Some("PGHOST")),
    ("hostaddr", Some("PGHOSTADDR")),
    ("port", Some("PGPORT")),
    ("dbname", Some("PGDATABASE")),
    ("user", Some("PGUSER")),
    ("password", Some("PGPASSWORD")),
    ("passfile", Some("PGPASSFILE")),
    ("sslmode", Some("PGSSLMODE")),
    ("sslrootcert", Some("PGSSLROOTCERT")),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT")),
    ("application_name", Some("PGAPPNAME")),
    ("options", Some("PGOPTIONS")),
    ("target_session_attrs", Some("PGTARGETSESSIONATTRS")),
];

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

/// Parses `key=value` pairs as libpq does: spaces around `=` allowed, values optionally
/// single-quoted with `\'` and `\\` escapes. Later keys win.
fn parse_pairs(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(pairs);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!(
                "word {} of the connection string is not `key=value` (not shown: it may be a password)",
                pairs.len() + 1
            ));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    Some('\\') => match chars.next() {
                        Some(c) => value.push(c),
                        None => return Err(unterminated(&key)),
                    },
                    Some('\'') => break,
                    Some(c) => value.push(c),
                    None => return Err(unterminated(&key)),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        value.push(n);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        pairs.push((key, value));
    }
}

/// The error of a quoted value without its closing quote, naming a key only if it is one
/// of libpq's.
fn unterminated(key: &str) -> String {
    if libpq_keyword(key) {
        format!("unterminated quoted value of `{key}`")
    } else {
        "unterminated quoted value (not shown: it may be a password)".into()
    }
}

/// libpq's keywords, those ipamctl understands and those it does not: a key outside this
/// list is not shown in a message (it may be a password that lost its `password=`).
fn libpq_keyword(key: &str) -> bool {
    KEYWORDS.iter().any(|(k, _)| *k == key)
        || [
            "sslcert",
            "sslkey",
            "sslpassword",
            "sslcrl",
            "sslcrldir",
            "sslsni",
            "sslcompression",
            "requirepeer",
            "ssl_min_protocol_version",
            "ssl_max_protocol_version",
            "krbsrvname",
            "gsslib",
            "gssencmode",
            "keepalives",
            "keepalives_idle",
            "keepalives_interval",
            "keepalives_count",
            "tcp_user_timeout",
            "replication",
            "service",
            "channel_binding",
            "client_encoding",
            "fallback_application_name",
            "load_balance_hosts",
            "require_auth",
        ]
        .contains(&key)
}

/// Decodes `%XX` escapes. The error says where, never what (it may be a password).
fn percent_decode(s: &str, what: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("invalid percent-encoding in the URL's {what}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("the URL's {what} is not UTF-8"))
}

/// Refuses a URL host that is not a host name, an address or a socket directory, or a port
/// that is not a number: what a password with an unencoded `:` or a lost `@` turns into.
/// Never says what it saw.
fn plain_host(host: &str, bracketed: bool, port: &str) -> Result<(), String> {
    let name_like = host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".-_:".contains(c));
    if !host.starts_with('/') && !name_like || !bracketed && host.contains(':') {
        return Err(
            "the URL's host is not a host name, an address or a socket directory (not shown: it may hold a password)"
                .into(),
        );
    }
    if !port.chars().all(|c| c.is_ascii_digit()) {
        return Err("the URL's port is not a number (not shown)".into());
    }
    Ok(())
}

/// Parses `postgres[ql]://[user[:password]@][host][:port][,…][/dbname][?key=value&…]`.
fn parse_url(rest: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    // The authority ends at the first `/` or `?`, as libpq reads it; an `@` after that is
    // a password with an unencoded `/` or `?` in it, whose pieces would otherwise become a
    // host or a database name and be shown.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    if rest[authority_end..].contains('@') {
        return Err(
            "the URL has an `@` after its host part: percent-encode `/`, `?`, `@` and `:` in the user name and password (%2F, %3F, %40, %3A)"
                .into(),
        );
    }
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match main.split_once('/') {
        Some((a, p)) => (a, Some(p)),
        None => (main, None),
    };
    let hosts = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => {
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                pairs.push(("user".into(), percent_decode(user, "user name")?));
            }
            if let Some(p) = password {
                pairs.push(("password".into(), percent_decode(p, "password")?));
            }
            hosts
        }
        None => authority,
    };
    if !hosts.is_empty() {
        let (mut names, mut ports) = (Vec::new(), Vec::new());
        for spec in hosts.split(',') {
            let (host, port) = if let Some(v6) = spec.strip_prefix('[') {
                let (h, after) = v6
                    .split_once(']')
                    .ok_or("unterminated `[` in the URL's host")?;
                (h.to_owned(), after.strip_prefix(':').unwrap_or(""))
            } else {
                match spec.rsplit_once(':') {
                    Some((h, p)) => (percent_decode(h, "host")?, p),
                    None => (percent_decode(spec, "host")?, ""),
                }
            };
            plain_host(&host, spec.starts_with('['), port)?;
            names.push(host);
            ports.push(port.to_owned());
        }
        if names.iter().any(|h| !h.is_empty()) {
            pairs.push(("host".into(), names.join(",")));
        }
        if ports.iter().any(|p| !p.is_empty()) {
            pairs.push(("port".into(), ports.join(",")));
        }
    }
    if let Some(db) = path.filter(|p| !p.is_empty()) {
        pairs.push(("dbname".into(), percent_decode(db, "database name")?));
    }
    for kv in query.into_iter().flat_map(|q| q.split('&')) {
        if kv.is_empty() {
            continue;
        }
        let (k, v) = kv.split_once('=').ok_or_else(|| {
            "a URL parameter is missing `=value` (not shown: it may be a password)".to_owned()
        })?;
        let k = percent_decode(k, "parameters")?;
        let v = percent_decode(v, "parameters")?;
        pairs.push((k, v));
    }
    Ok(pairs)
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
