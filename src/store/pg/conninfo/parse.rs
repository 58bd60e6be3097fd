//! The syntax of a connection string as libpq reads it: `key=value` pairs (quoted values
//! with `\'` and `\\` escapes) and `postgres://` URLs (percent-decoded, bracketed IPv6
//! hosts, several hosts), into pairs; and libpq's keywords, the only keys a message names.

/// The libpq keywords ipamctl understands, with the environment variable of each.
pub(super) const KEYWORDS: &[(&str, Option<&str>)] = &[
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

/// Parses `key=value` pairs as libpq does: spaces around `=` allowed, values optionally
/// single-quoted with `\'` and `\\` escapes. Later keys win.
pub(super) fn parse_pairs(s: &str) -> Result<Vec<(String, String)>, String> {
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
pub(super) fn unterminated(key: &str) -> String {
    if libpq_keyword(key) {
        format!("unterminated quoted value of `{key}`")
    } else {
        "unterminated quoted value (not shown: it may be a password)".into()
    }
}

/// libpq's keywords, those ipamctl understands and those it does not: a key outside this
/// list is not shown in a message (it may be a password that lost its `password=`).
pub(super) fn libpq_keyword(key: &str) -> bool {
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
pub(super) fn percent_decode(s: &str, what: &str) -> Result<String, String> {
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
pub(super) fn plain_host(host: &str, bracketed: bool, port: &str) -> Result<(), String> {
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
pub(super) fn parse_url(rest: &str) -> Result<Vec<(String, String)>, String> {
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
