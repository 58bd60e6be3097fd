//! The seal of an owner index record ([`crate::store::fs::owner::index`]): what makes a line edited
//! by hand vouch for nothing.

/// A record's seal: FNV-1a (64 bits) of its status fields and its owner, so that a line
/// whose owner (or status) was edited by hand, without the seal made again, vouches for
/// nothing: a look-up then reads the file instead of believing the owner the line names.
pub(super) fn seal(head: &[u8], owner: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in head.iter().chain(b" ").chain(owner) {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Lowercase hexadecimal digits, byte-wise.
pub(super) fn parse_hex(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |n, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            _ => return None,
        };
        Some((n << 4) | u64::from(d))
    })
}
