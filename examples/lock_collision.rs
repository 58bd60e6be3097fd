//! Finds two owner names whose locks share a byte (the lock-byte collision of issue 20):
//! `FloatingIP/c<15 hex digits>` owners in pool `public-zone-a` of the cluster scope, by
//! Brent's cycle finding on `v -> the offset of FloatingIP/c<v>`. A birthday search in
//! constant memory over the 60 bits of an owner's offset: about 2^32 steps.
//!
//! Each step runs the two FNV-1a passes of `Owner::key` and `Target::offset` inline, on the
//! bytes those functions hash, because going through them (a name formatted and parsed per
//! step) is thirty times slower; the inline step is checked against the real functions
//! before the search, and the pair found is checked with them again, so it is their
//! collision, not this file's. Prints the pair that `store::fs::lock`'s tests and
//! `tests/adversary.rs` use.
//!
//!     cargo run --release --example lock_collision [START]

use ipamctl::model::Owner;
use ipamctl::store::fs::lock::Target;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
const POOL: &str = "public-zone-a";
const MASK: u64 = (1 << 60) - 1;

fn fnv(hash: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(FNV_PRIME))
}

/// The owner of value `v`.
fn name(v: u64) -> String {
    format!("FloatingIP/c{:015x}", v & MASK)
}

/// The byte `owner`'s lock takes in pool `public-zone-a`, by the real functions.
fn offset(owner: &str) -> u64 {
    let owner = Owner::parse(owner, None).expect("a valid owner");
    let target = Target::Owner {
        scope: "",
        pool: POOL,
        key: owner.key(),
    };
    u64::try_from(target.offset()).expect("offsets are positive")
}

/// The hash states after the fixed parts: `FloatingIP/c` of the key, and `owner`, the empty
/// scope and the pool (each part ends in a NUL) of the offset.
struct Fast {
    name: u64,
    target: u64,
}

impl Fast {
    fn new() -> Fast {
        let target = [&b"owner"[..], b"", POOL.as_bytes()]
            .iter()
            .fold(FNV_OFFSET, |h, part| fnv(fnv(h, part), b"\0"));
        Fast {
            name: fnv(FNV_OFFSET, b"FloatingIP/c"),
            target,
        }
    }

    /// [`offset`] of [`name`]`(v)`, inline.
    fn step(&self, v: u64) -> u64 {
        let v = v & MASK;
        let mut hex = [0u8; 15];
        for (i, digit) in hex.iter_mut().enumerate() {
            let nibble = (v >> (4 * (14 - i))) & 0xf;
            *digit = b"0123456789abcdef"[nibble as usize];
        }
        // The key hashes `KIND/NAME UID` (no uid: nothing after the space).
        let key = fnv(fnv(self.name, &hex), b" ");
        let hash = fnv(fnv(self.target, &key.to_le_bytes()), b"\0");
        (2 << 60) | (hash >> 4)
    }
}

fn main() {
    let start: u64 = std::env::args()
        .nth(1)
        .map_or(1, |s| s.parse().expect("START is a number"));
    let fast = Fast::new();
    for v in [0, 1, start, 0xfff_ffff_ffff_ffff, 0x123_4567_89ab_cdef] {
        assert_eq!(
            fast.step(v),
            offset(&name(v)),
            "the inline step drifted from the real one"
        );
    }
    let step = |v: u64| fast.step(v);
    // Brent: the cycle's length first, then two walkers that far apart meet at the cycle's
    // entry, and their predecessors are two different names with one offset.
    let (mut power, mut length) = (1u64, 1u64);
    let (mut tortoise, mut hare) = (start, step(start));
    while tortoise != hare {
        if power == length {
            tortoise = hare;
            power *= 2;
            length = 0;
        }
        hare = step(hare);
        length += 1;
    }
    let (mut a, mut b) = (start, start);
    for _ in 0..length {
        b = step(b);
    }
    if a == b {
        eprintln!("the start lies on the cycle: try another START");
        std::process::exit(1);
    }
    loop {
        let (na, nb) = (step(a), step(b));
        if na == nb {
            break;
        }
        (a, b) = (na, nb);
    }
    let (first, second) = (name(a), name(b));
    assert_ne!(first, second);
    assert_eq!(
        offset(&first),
        offset(&second),
        "not a collision of the real hashes"
    );
    println!("{first} {second} share byte {}", offset(&first));
}
