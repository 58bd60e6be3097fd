//! What a lock guards, and the byte of the lock file it locks.
//!
//! The byte of a lock is derived from what is locked: a kind (pool, scope, owner) picks one
//! of three disjoint quarters of the offset range, and a hash of the target the byte within
//! it, so locks of different kinds never share a byte. Two targets of one kind may still
//! hash to one byte (FNV-1a, 60 bits: chance, or a crafted name); a process then reuses its
//! own hold (`registry.rs`). Such a pair exists and was constructed
//! (`examples/lock_collision.rs`, a birthday search of about a minute):
//! `FloatingIP/c0d869d229a8fe4b` and `FloatingIP/cdf8df1ad2d92236` share a byte in pool
//! `public-zone-a`; a claim of one waits for a claim of the other, and each gets its own
//! address (`tests/adversary.rs`).

use crate::model::{Namespace, Owner, PoolName};

/// What a lock guards, hashed into the byte it locks (see the module docs).
#[derive(Clone, Copy, Debug)]
pub enum Target<'a> {
    /// A pool: `allocate` shares it, `apply` and `pool delete` hold it alone.
    Pool { scope: &'a str, pool: &'a str },
    /// The set of pools of a scope, while `apply` checks overlaps and writes.
    Scope { scope: &'a str },
    /// The claims charged to a namespace's quotas (`crate::engine::quota`). It shares the
    /// scope's quarter, told apart by its tag.
    Quota { scope: &'a str },
    /// One owner's name in one pool (its [`crate::model::Owner::lock_key`]: the name's,
    /// whatever the uid, except a VPC's), or its identity there ([`Target::owners`]).
    Owner {
        scope: &'a str,
        pool: &'a str,
        key: u64,
    },
}

impl<'a> Target<'a> {
    /// The lock of `owner` in `pool` of scope `ns`: its name's ([`Owner::lock_key`]), the one
    /// every claim, release and `mac set` of the owner, and of its name under any other uid,
    /// holds (and a claim judging a MAC record that names the owner waits for).
    pub fn owner(ns: Option<&'a Namespace>, pool: &'a PoolName, owner: &Owner) -> Target<'a> {
        Target::Owner {
            scope: scope_text(ns),
            pool: pool.as_str(),
            key: owner.lock_key(),
        }
    }

    /// The locks a claim, a release and `mac set` of `owner` in `pool` take, in this order:
    /// [`Target::owner`], then, for an owner with a uid, its identity's ([`Owner::key`]), the
    /// one versions before the name's lock took. So a process of such a version and one of
    /// this version, working on one owner in one state directory during an upgrade, still
    /// exclude each other; no process takes the second before the first, so no two wait for
    /// each other.
    pub fn owners(
        ns: Option<&'a Namespace>,
        pool: &'a PoolName,
        owner: &Owner,
    ) -> impl Iterator<Item = Target<'a>> + use<'a> {
        let name = Target::owner(ns, pool, owner);
        let identity =
            (owner.uid().is_some() && owner.key() != owner.lock_key()).then(|| Target::Owner {
                scope: scope_text(ns),
                pool: pool.as_str(),
                key: owner.key(),
            });
        std::iter::once(name).chain(identity)
    }
    /// The locked byte: the kind's quarter of the positive range of `off_t`, and FNV-1a of
    /// the target within it. Public for `examples/lock_collision.rs`, which searches for two
    /// owners that share one.
    pub fn offset(&self) -> i64 {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let key;
        let (quarter, parts): (u64, [&[u8]; 4]) = match self {
            Target::Pool { scope, pool } => (0, [b"pool", scope.as_bytes(), pool.as_bytes(), b""]),
            Target::Scope { scope } => (1, [b"scope", scope.as_bytes(), b"", b""]),
            Target::Quota { scope } => (1, [b"quota", scope.as_bytes(), b"", b""]),
            Target::Owner {
                scope,
                pool,
                key: k,
            } => {
                key = k.to_le_bytes();
                (2, [b"owner", scope.as_bytes(), pool.as_bytes(), &key])
            }
        };
        let hash = parts.iter().fold(OFFSET, |hash, part| {
            part.iter()
                .chain(b"\0")
                .fold(hash, |h, &b| (h ^ u64::from(b)).wrapping_mul(PRIME))
        });
        // 60 bits of hash under 2 bits of kind: positive, and far from the end of the range.
        i64::try_from((quarter << 60) | (hash >> 4)).expect("62 bits fit an i64")
    }

    /// The lock as a message names it.
    pub(super) fn describe(&self) -> String {
        let scope = |s: &str| {
            if s.is_empty() {
                String::new()
            } else {
                format!(" in namespace `{s}`")
            }
        };
        match self {
            Target::Pool { scope: s, pool } => format!("the lock of pool `{pool}`{}", scope(s)),
            Target::Scope { scope: s } => format!("the lock of the pools{}", scope(s)),
            Target::Quota { scope: s } => format!("the lock of the quotas{}", scope(s)),
            Target::Owner {
                scope: s,
                pool,
                key,
            } => format!(
                "the lock of one owner (key {key:016x}) in pool `{pool}`{}",
                scope(s)
            ),
        }
    }
}

/// The scope part of a lock's target: the namespace, or `""` for the cluster scope.
pub(in crate::store::fs) fn scope_text(ns: Option<&Namespace>) -> &str {
    ns.map_or("", Namespace::as_str)
}
