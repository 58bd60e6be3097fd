//! The seal of an owner index record ([`crate::store::fs::owner::index`]): what makes a line edited
//! by hand vouch for nothing.

/// A record's seal: a 64-bit hash of its status fields and its owner, so that a line
/// whose owner (or status) was edited by hand, without the seal made again, vouches for
/// nothing: a look-up then reads the file instead of believing the owner the line names.
///
/// Eight bytes a step (FxHash's rotate, xor and multiply by an odd constant, then a final
/// mix), where format 3 took FNV-1a a byte at a time: every look-up of a new owner seals
/// each line of its pool's index, 50,000 lines and 7.8 MB at 50,000 allocations (issue 47).
/// Each step is a bijection of the running hash, so any edit of one eight-byte word, or of
/// the length, always changes the seal; it guards against hand edits, not an adversary who
/// can write the index (one who can write the state directory needs no forged seal).
pub(super) fn seal(head: &[u8], owner: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let step = |hash: u64, word: u64| (hash.rotate_left(5) ^ word).wrapping_mul(K);
    let mut hash = (head.len() as u64) << 32 | owner.len() as u64;
    for part in [head, owner] {
        let mut words = part.chunks_exact(8);
        for word in words.by_ref() {
            hash = step(
                hash,
                u64::from_le_bytes(word.try_into().expect("eight bytes")),
            );
        }
        let mut tail = [0u8; 8];
        tail[..words.remainder().len()].copy_from_slice(words.remainder());
        hash = step(hash, u64::from_le_bytes(tail));
    }
    // Final mix (SplitMix64's), so that the last word reaches every bit of the seal.
    hash ^= hash >> 30;
    hash = hash.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash ^= hash >> 27;
    hash = hash.wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
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
