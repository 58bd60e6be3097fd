//! The fast path of [`super::decode_allocation`] and [`super::decode_cooldown`]: a line
//! parser for the exact bytes that [`super::encode`] writes for an allocation or a cooldown
//! record. `list` and `check` decode every allocation file, and a claim in a pool with
//! `reuseAfter` every record of the pool, so this is their hot path: parsing takes about
//! 1 µs where the YAML library takes about 28; with the guard below, a file costs about 6 µs.
//!
//! The parser knows one layout only (fixed key order, 2-space indent, one scalar per line,
//! plain or quoted without escapes, from a conservative character set) and returns `None`
//! for anything else. It does not need to be right about YAML: the caller accepts its result
//! only when encoding it gives back the input byte for byte, and the YAML library reads what
//! ipamctl encodes as the manifest encoded (the write/read round trip that every state file
//! already depends on). See `decode_canonical_allocation` in `yaml.rs`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::model::cooldown::{CooldownRecord, CooldownSpec};
use crate::model::mac::Mac;
use crate::model::{
    AllocationManifest, AllocationSpec, Metadata, Namespace, Owner, OwnerKind, PoolName, Timestamp,
    Uid, parse_addr,
};

/// Longer input goes to the YAML library. Far above any real allocation (a few hundred bytes),
/// far below every limit of the library's budget (1 MiB, 250,000 nodes), so the library never
/// refuses for size what the fast path accepts.
const MAX_BYTES: usize = 64 * 1024;

/// Keys longer than this go to the YAML library, which limits simple keys to 1,024 characters.
const MAX_KEY_BYTES: usize = 256;

/// Parses `text` if it has the layout `encode` writes for an allocation; `None` otherwise.
/// Names, namespace, pool, address and owner go through the model's validating constructors;
/// the caller still runs `validate()` and the byte-for-byte guard.
pub(super) fn parse_allocation(text: &str) -> Option<AllocationManifest> {
    let mut lines = Lines::new(text)?;
    let (api_version, kind, metadata) = lines.head()?;
    let (pool, address, owner) = lines.spec()?;
    let mac = match lines.optional_field("  mac: ")? {
        Some(mac) => Some(Mac::parse(mac).ok()?),
        None => None,
    };
    let expires_at = match lines.optional_field("  expiresAt: ")? {
        Some(at) => Some(Timestamp::parse(at).ok()?),
        None => None,
    };
    lines.end()?;
    Some(AllocationManifest {
        api_version,
        kind,
        metadata,
        spec: AllocationSpec {
            pool,
            address,
            owner,
            mac,
            expires_at,
        },
    })
}

/// Parses `text` if it has the layout `encode` writes for a cooldown record; as
/// [`parse_allocation`] otherwise. A claim in a pool with `reuseAfter` reads every record of
/// the pool, so this is that claim's hot path.
pub(super) fn parse_cooldown(text: &str) -> Option<CooldownRecord> {
    let mut lines = Lines::new(text)?;
    let (api_version, kind, metadata) = lines.head()?;
    let (pool, address, owner) = lines.spec()?;
    let released_at = lines.field("  releasedAt: ")?.to_owned();
    lines.end()?;
    Some(CooldownRecord {
        api_version,
        kind,
        metadata,
        spec: CooldownSpec {
            pool,
            address,
            // A prefix's record has a `prefixLength` line, which `spec()` does not read: it
            // goes to the library's parser.
            prefix_length: None,
            owner,
            released_at,
        },
    })
}

/// The lines of a text that ends in a newline, consumed front to back.
struct Lines<'a> {
    iter: std::iter::Peekable<std::str::Split<'a, char>>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Option<Lines<'a>> {
        if text.len() > MAX_BYTES {
            return None;
        }
        let iter = text.strip_suffix('\n')?.split('\n').peekable();
        Some(Lines { iter })
    }

    /// `apiVersion`, `kind` and `metadata` (name, namespace, creationTimestamp, labels,
    /// annotations; no ownerRefs), the head of every manifest ipamctl writes for a claim or
    /// a release.
    fn head(&mut self) -> Option<(String, String, Metadata)> {
        let api_version = self.field("apiVersion: ")?.to_owned();
        let kind = self.field("kind: ")?.to_owned();
        self.exact("metadata:")?;
        let name = self.field("  name: ")?.to_owned();
        let namespace = match self.optional_field("  namespace: ")? {
            Some(ns) => Some(Namespace::new(ns).ok()?),
            None => None,
        };
        let creation_timestamp = match self.optional_field("  creationTimestamp: ")? {
            Some(at) => Some(Timestamp::parse(at).ok()?),
            None => None,
        };
        let labels = self.map("  labels:")?;
        let annotations = self.map("  annotations:")?;
        let metadata = Metadata {
            name,
            namespace,
            creation_timestamp,
            deletion_timestamp: None,
            labels,
            annotations,
            owner_refs: Vec::new(),
        };
        Some((api_version, kind, metadata))
    }

    /// `spec:` with its pool, address and owner, which both kinds begin their spec with.
    fn spec(&mut self) -> Option<(PoolName, IpAddr, Owner)> {
        self.exact("spec:")?;
        let pool = PoolName::new(self.field("  pool: ")?).ok()?;
        let address = parse_addr(self.field("  address: ")?).ok()?;
        Some((pool, address, self.owner()?))
    }

    /// `  owner:` with its kind, uid (if any) and name.
    fn owner(&mut self) -> Option<Owner> {
        self.exact("  owner:")?;
        let kind: OwnerKind = self.field("    kind: ")?.parse().ok()?;
        let uid = match self.optional_field("    uid: ")? {
            Some(uid) => Some(Uid::new(uid).ok()?),
            None => None,
        };
        Owner::new(kind, self.field("    name: ")?, uid).ok()
    }

    /// The next line is exactly `want`.
    fn exact(&mut self, want: &str) -> Option<()> {
        self.iter.next_if(|line| *line == want).map(drop)
    }

    /// The next line is `prefix` followed by a scalar; returns the scalar's value.
    fn field(&mut self, prefix: &str) -> Option<&'a str> {
        scalar(self.iter.next()?.strip_prefix(prefix)?)
    }

    /// Like [`Lines::field`] if the next line starts with `prefix`; `Some(None)` if it does not.
    fn optional_field(&mut self, prefix: &str) -> Option<Option<&'a str>> {
        match self.iter.peek() {
            Some(line) if line.starts_with(prefix) => self.field(prefix).map(Some),
            _ => Some(None),
        }
    }

    /// A string map under `header`, one `key: value` per line indented by four spaces, keys
    /// strictly ascending (the order a `BTreeMap` serializes in; a repeated key declines).
    /// Empty when `header` is not the next line; `None` when it is but no entry follows.
    fn map(&mut self, header: &str) -> Option<BTreeMap<String, String>> {
        let mut map = BTreeMap::new();
        if self.exact(header).is_none() {
            return Some(map);
        }
        let mut last: Option<&str> = None;
        while let Some(entry) = self.iter.next_if(|line| line.starts_with("    ")) {
            let (key, value) = entry_of(&entry[4..])?;
            if last.is_some_and(|last| last >= key) {
                return None;
            }
            last = Some(key);
            map.insert(key.to_owned(), value.to_owned());
        }
        (!map.is_empty()).then_some(map)
    }

    /// No line is left.
    fn end(&mut self) -> Option<()> {
        self.iter.next().is_none().then_some(())
    }
}

/// Splits `key: value` (both scalars; a plain key holds no `:`).
fn entry_of(line: &str) -> Option<(&str, &str)> {
    let (key, value) = if let Some(quoted) = line.strip_prefix('"') {
        let close = quoted.find('"')?;
        (&line[..close + 2], quoted[close + 1..].strip_prefix(": ")?)
    } else {
        line.split_once(": ")?
    };
    if key.len() > MAX_KEY_BYTES || (!key.starts_with('"') && key.contains(':')) {
        return None;
    }
    Some((scalar(key)?, scalar(value)?))
}

/// The value of a scalar written plain (`[A-Za-z0-9._/:-]`, not empty) or quoted (printable
/// ASCII between `"` or `'`, without either quote or `\`, so without escapes); `None` for
/// anything else. Whether the encoder would have written it that way is for the caller's
/// byte-for-byte guard to decide.
fn scalar(s: &str) -> Option<&str> {
    let quoted = [b'"', b'\''].into_iter().find_map(|quote| {
        let inner = s
            .strip_prefix(char::from(quote))?
            .strip_suffix(char::from(quote))?;
        Some(inner)
    });
    if let Some(inner) = quoted {
        let printable = inner
            .bytes()
            .all(|b| (b' '..=b'~').contains(&b) && !matches!(b, b'"' | b'\'' | b'\\'));
        return printable.then_some(inner);
    }
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'/' | b'-' | b':'));
    plain.then_some(s)
}

#[cfg(test)]
mod tests;
