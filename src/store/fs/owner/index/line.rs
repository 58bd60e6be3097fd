//! Reading one line of an index file: byte-wise, in one pass, a line that does not parse
//! or whose seal does not match vouching for nothing (the file is then read).

use std::net::IpAddr;

use super::seal::{parse_hex, seal};
use super::{Entry, Key, Stamp};
use crate::model::Owner;

// Byte-wise, one pass over the line: a look-up parses one line per allocation of the pool,
// 50,000 at a time. `at` is the line's offset in the file, for the owner's range.
pub(super) fn parse_line<K: Key>(line: &[u8], at: usize) -> Option<(K, Option<Entry<K>>)> {
    let mut rest = line;
    let mut field = || {
        let end = rest.iter().position(|&b| b == b' ').unwrap_or(rest.len());
        let (field, tail) = rest.split_at(end);
        rest = tail.get(1..).unwrap_or_default();
        field
    };
    let address = K::parse(field())?;
    let ino = field();
    if ino == b"-" {
        return field().is_empty().then_some((address, None));
    }
    let stamp = Stamp {
        ino: parse_u64(ino)?,
        size: parse_u64(field())?,
        mtime: parse_i64(field())?,
        ctime: parse_i64(field())?,
    };
    let (whole, created) = match field() {
        b"w" => (true, None),
        b"-" => (false, None),
        [b'w', secs @ ..] => (true, Some(parse_u64(secs)?)),
        _ => return None,
    };
    let head_len = line.len() - rest.len() - 1;
    let (sealed, owner) = rest.split_at(rest.len().min(16));
    rest = owner.get(1..).unwrap_or_default();
    if rest.is_empty()
        || owner.first() != Some(&b' ')
        || sealed.len() != 16
        || parse_hex(sealed)? != seal(&line[..head_len], rest)
    {
        // An owner (or a status) edited by hand: the line vouches for nothing, and the file
        // is read.
        return None;
    }
    let start = at + (line.len() - rest.len());
    Some((
        address,
        Some(Entry {
            address,
            stamp,
            owner: (
                u32::try_from(start).ok()?,
                u32::try_from(at + line.len()).ok()?,
            ),
            whole,
            created,
        }),
    ))
}

/// The owner in `text` (as [`owner_text`](super::owner_text) writes it), validated as a manifest's would be.
pub fn parse_owner(text: &str) -> Option<Owner> {
    let (kind, name, uid) = owner_fields(text)?;
    let uid = match uid {
        "-" => None,
        uid => Some(crate::model::Uid::new(uid).ok()?),
    };
    Owner::new(kind.parse().ok()?, name, uid).ok()
}

/// The three fields of an owner text, when it has exactly three and none is empty.
pub(super) fn owner_fields(text: &str) -> Option<(&str, &str, &str)> {
    let mut parts = text.split(' ');
    let fields = (parts.next()?, parts.next()?, parts.next()?);
    let complete = parts.next().is_none()
        && !fields.0.is_empty()
        && !fields.1.is_empty()
        && !fields.2.is_empty();
    complete.then_some(fields)
}

pub(super) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    digits.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

pub(super) fn parse_i64(digits: &[u8]) -> Option<i64> {
    match digits.strip_prefix(b"-") {
        Some(rest) => i64::try_from(parse_u64(rest)?).ok().map(|n| -n),
        None => i64::try_from(parse_u64(digits)?).ok(),
    }
}

pub(super) fn parse_address(text: &[u8]) -> Option<IpAddr> {
    if text.contains(&b':') {
        // IPv6 records are written as `Display` writes the address; `std` reads it back.
        return std::str::from_utf8(text)
            .ok()?
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(IpAddr::V6);
    }
    let mut octets = [0u8; 4];
    let mut parts = text.split(|&b| b == b'.');
    for octet in &mut octets {
        let part = parts.next()?;
        if part.len() > 3 || (part.len() > 1 && part[0] == b'0') {
            return None;
        }
        *octet = u8::try_from(parse_u64(part)?).ok()?;
    }
    parts.next().is_none().then_some(IpAddr::from(octets))
}
