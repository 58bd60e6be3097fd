//! The use cases: allocate, release, apply, delete, VPCs, subnets, cooldown, reconcile, check,
//! diff, history, export/import. Each takes its own locks and unit of work, written against
//! [`Store`](crate::store::Store); nothing outside `engine` and `store` takes a lock. Warnings come back as values.
//!
//! # Invariants
//!
//! 1. No two allocations hold the same address of a pool: an allocation's name is
//!    `<pool>-<a-b-c-d>`, and a claim ([`Claims::claim`](crate::store::Claims::claim)) creates a name only if it does
//!    not exist.
//! 2. One owner identity (kind, name, uid) holds at most one address per pool, also when
//!    requests for it race: every request for an owner runs its look-up *and* its claim
//!    while holding the claim's locks ([`Locks::lock_claim`](crate::store::Locks::lock_claim)), which on the file store
//!    include that owner's lock in the pool, so a second request waits and then finds the
//!    first one's allocation.
//! 3. Every manifest under its final name is complete (see the write protocol in
//!    [`crate::store::fs`]).
//! 4. A crash at any instant leaves 1–3 intact, and the owner that asks again gets its
//!    address back: [`Queries::find_owner`](crate::store::Queries::find_owner) answers from the stored objects as they are, never
//!    from derived state alone (how the file store does that cheaply, and what outside
//!    writers can still do, is documented in [`crate::store::fs`]).
//! 5. A guarded release never deletes another owner's allocation: the store's release
//!    ([`Claims::release`](crate::store::Claims::release)) deletes an allocation only if it is still the one the caller
//!    read, and on the file store it does so only in a process that holds the lock of the
//!    owner recorded *in the file* and read the file after taking that lock. Nobody else can
//!    delete that file meanwhile (they would need the same lock), so the address cannot be
//!    released and re-claimed under its feet.
//! 6. `allocate` holds the pool's lock shared from before it reads the pool until its claim
//!    is durable; `apply` and `pool delete` hold it exclusive while they check allocations
//!    and change the pool. So a claim is always checked against the pool as it stands.
//!
//! On PostgreSQL ([`crate::store::pg`]) the same code runs each command as one transaction
//! ([`Units::atomically`](crate::store::Units::atomically)), and the arbiters are the table's: 1 is the primary key
//! (namespace, pool, address) and 2 the unique (namespace, pool, owner kind, name, uid),
//! both decided by one `INSERT … ON CONFLICT DO NOTHING` ([`Claims::claim`](crate::store::Claims::claim); a same-owner
//! race answers [`Claim::OwnerHolds`](crate::store::Claim::OwnerHolds) instead of walking every candidate); 3 and 4 are the
//! transaction's atomicity; 5 is the row read again and a `DELETE` guarded by the owner's
//! columns ([`Claims::release`](crate::store::Claims::release)); 6 is the pool's row read `FOR SHARE` by a claim (all a
//! [`ClaimLock`](crate::store::ClaimLock) holds there: no owner is locked) and `FOR UPDATE` by `apply` and
//! `pool delete`, each row lock held until the transaction ends, whatever becomes of its
//! guard.
//!
//! A store that cannot be written (a read-only mount) still answers an owner that already
//! holds an address: without locks, since a look-up that finds the owner's allocation is
//! right whatever runs beside it; only a claim needs the locks, and then fails.
//!
//! The order every use case takes its locks in, and why it cannot deadlock, is
//! [`crate::store::guard`]'s.

pub mod allocate;
pub mod apply;
pub mod check;
pub mod cooldown;
pub mod diff;
pub mod doomed;
pub mod explain;
pub mod explained;
pub mod git;
pub mod history;
pub mod holder;
pub mod list;
pub mod pool;
pub mod prefix;
pub mod reconcile;
pub mod release;
pub mod subnet;
pub mod subnet_usage;
pub mod transfer;
pub mod vpc;
pub mod warning;
