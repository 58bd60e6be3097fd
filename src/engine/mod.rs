//! The use cases: allocate, release, apply, delete, VPCs, subnets, cooldown, reconcile, check,
//! diff, history, export/import, and the host tier's DHCP and DNS exports (read-only, no
//! locks). The operations a server's resolvers call, each checking the caller's scope
//! first, are [`floating`] (a tenant's floating IPs) and [`admin`] (public pools, VPCs,
//! subnets). Each takes its own locks and unit of work, written against
//! [`Store`](crate::store::Store); nothing outside `engine` and `store` takes a lock. Warnings come back as values.
//!
//! The engine never names a store (`tests/layers.rs` fails on an engine file that imports
//! `store::fs` or `store::pg`). What only one kind of store can do it asks of the store
//! ([`Capabilities`](crate::store::Capabilities)): `check` walks a
//! [`StateDir`](crate::store::StateDir) or reads a [`Database`](crate::store::Database) in one
//! snapshot, `diff` and `history` run git in the state directory's root, `export` asks the
//! database which namespaces it leaves out. What a store finds about itself comes back as
//! store values ([`crate::store::inspect`]) that `check` turns into its report.
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
//!    first one's allocation. And an owner's name (every kind but `VPC`) is one identity
//!    per pool ([`identity`]): the lock is the name's, whatever the uid, so a request for
//!    the name under another uid (or none) waits too, then finds the holder and is refused.
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
//! 7. A NIC's MAC (`spec.mac`) is held by at most one allocation of a pool, also when claims
//!    race: the store's arbiter decides it as it decides an address ([`Claims::claim`](crate::store::Claims::claim)
//!    answers [`Claim::MacHeld`](crate::store::Claim::MacHeld); `import` and `mac set` pass the same arbiter:
//!    [`Claims::claim_copy`](crate::store::Claims::claim_copy), [`Claims::set_mac`](crate::store::Claims::set_mac)). On the file store it is a MAC record
//!    created exclusively (`store/fs/macs.rs`), on PostgreSQL a unique index (migration 10).
//!    Only a NIC's owner (`VirtualMachine`, `Node`) gets one, and an owner keeps its MAC
//!    unless `mac set`, guarded by the owner as a release is, changes it ([`mac`]) on every
//!    allocation of the NIC (its pools in the scope) at once.
//!
//! On PostgreSQL ([`crate::store::pg`]) the same code runs each command as one transaction
//! ([`Units::atomically`](crate::store::Units::atomically)), and the arbiters are the table's: 1 is the primary key
//! (namespace, pool, address) and 2 the unique (namespace, pool, owner kind, name, uid)
//! with, for its name rule, the unique index on (namespace, pool, owner kind, name) of every
//! kind but `VPC` (migration 12), all decided by one `INSERT … ON CONFLICT DO NOTHING`
//! ([`Claims::claim`](crate::store::Claims::claim); a same-owner race answers [`Claim::OwnerHolds`](crate::store::Claim::OwnerHolds) instead of walking every
//! candidate, a namesake's [`Claim::NameHeld`](crate::store::Claim::NameHeld)); 3 and 4 are the transaction's atomicity; 5 is the
//! row read again and a `DELETE` guarded by the owner's
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
//!
//! # Who keeps what: command × lock × invariant
//!
//! Every command that writes, the engine function it calls, the locks it takes (in the
//! order of [`crate::store::guard`]; on PostgreSQL the same calls lock rows of the unit's
//! transaction) and what those locks let it keep. `tests/lock_table.rs` reads this table:
//! each entry must reach every lock its row names (in backticks), and an engine function a
//! command calls that writes must have a row (`none` says why it needs no lock).
//!
//! | command | engine entry | locks | invariants kept |
//! |---|---|---|---|
//! | `allocate POOL…` | `allocate::allocate`, `allocate::allocate_all` | `claim`: each pool shared, then the owner in each; in several pools (dual stack) all of them first, held until the last pool's claim; for a new owner, then the namespace's quota lock when a quota limits it (`quota::admit`) | 1, 2, 6; a pool being deleted takes no claim; the cooldown window; a release of the owner comes wholly before or after a claim in several pools; the namespace's quotas (`quota::admit`) |
//! | `allocate --zone` | `allocate::allocate_zone` | `claim`: every pool of the zone, in name order; then the tenant's quota lock (`quota::admit`) | 1, 2, 6; the tenant's `floatingIPs` quota |
//! | `allocate SUPERNET` (a prefix) | `prefix::claim` | `prefix-claim`: the supernet's pool, exclusive; then the namespace's quota lock (`quota::admit`) | one prefix per owner per supernet; no overlap; the cooldown window; the namespace's `prefixes` quota (a VPC's range: its VPC's namespace) |
//! | `mac set` | `mac::set` | `claim`: every pool the owner's name holds an address in, shared, then the name in each, held while each of the NIC's allocations is changed | 7; the NIC's allocations change together, the earlier ones changed back when a later pool refuses the MAC |
//! | `release POOL ADDRESS` | `release::release_address` | `pool`, exclusive (the owner's lock inside the store's release) | 5; a cooldown record before the delete |
//! | `release` by selector | `release::release_each` | as `release POOL ADDRESS` for each address; an owner's addresses in several pools: first each `pool` (exclusive with a cooldown, else shared), then `claim` in all of them, held for all its releases | 5; a cooldown record before the delete; a claim of the owner in several pools comes wholly before or after |
//! | `release SUPERNET PREFIX` | `prefix::release_prefix`, `prefix::release_each` | `pool`, exclusive | 5 for prefixes; the cooldown record |
//! | `apply` | `apply::apply` | `scope` (each written), then `pool` (each written, exclusive) | 6; a changed pool still holds its allocations, subnets and prefix claims; public pools do not overlap; a subnet reaches the routers of the DHCP routes it inherits from its pool (`SubnetManifest::dhcp`); a new pool moves no DHCP subnet id (`created`) |
//! | `pool create` | `admin::create_public_pool` (as apply) | `scope` (the cluster's), then `pool`, exclusive | as `apply`: public pools do not overlap; a new pool moves no DHCP subnet id; a pool of the name with another spec is refused, never changed |
//! | `pool delete` | `admin::delete_pool` (the caller's scope), then `pool::delete` | `scope`, then `pool`, exclusive | 6; nothing held is orphaned; serial with `vpc create`/`vpc delete` |
//! | `subnet create` | `admin::create_subnet` (`subnet::put`, `subnet::carve`) | `pool`, exclusive | subnets of a pool do not overlap and stay inside it; it reaches the routers of the DHCP routes it inherits; a new subnet moves no DHCP subnet id (`created`) |
//! | `subnet delete` | `admin::delete_subnet` (`subnet::delete`) | `pool`, exclusive | no claim runs against a half-deleted subnet |
//! | `vpc create` | `admin::create_vpc` (vpc::create, then the uplink) | `scope`; `prefix-claim` in the supernet; then, for the uplink, `claim` over the zone's pools | VPC pool names are injective; a range is claimed before its pool; serial with `vpc delete`; a new pool moves no DHCP subnet id (`created`); with `--uplink-zone`, the router's uplink as `allocate --zone` claims it (1, 2, 6) |
//! | `vpc delete` | `admin::delete_vpc` (`vpc::delete`) | `scope`; `pool`, exclusive, for each of its pools (then as `release`) | only objects of the VPC's uid are touched; pools marked before they are emptied |
//! | `check --fix` (cooldown) | `cooldown::prune` | `pool`, exclusive | a record a release wrote since `check` looked is kept |
//! | `import` | `transfer::import_dir` | `scope` (every scope), then `pool` (every pool, exclusive), then the quota lock of every namespace with a quota | serial with every writer of those scopes and pools; the target's quotas |
//! | `export DIR` | `transfer::export` | `none`: it writes a new, empty state directory made by the same command, which no other process works in | — |
//!
//! `allocate` and `release`, alone or many (`allocate -f`, `release -f`), reach their rows
//! through the executor ([`executor`]), which takes no lock of its own: it runs each
//! request on one store (a worker's), where the request takes its row's locks, inside the
//! store's group of requests where the store groups them ([`Units::grouped`](crate::store::Units::grouped)).
//!
//! # The caller's scope
//!
//! Every entry above that a server reaches takes the caller's [`scope::Scope`] and checks
//! it first, before any lock ([`scope::Scope::check`]): the typed requests carry it
//! ([`request::AllocateRequest::new`], [`request::ReleaseRequest::new`]), a listing's
//! namespaces come from [`scopes::scopes`] (only those in scope), and `vpc::create`,
//! `vpc::get`, `vpc::delete`, `subnet::put`, `subnet::carve`, `subnet::delete`,
//! `pool::show`, `pool::map` and `pool::owners` take it as their second argument. The command line and the batch pass
//! [`scope::Scope::everything`]; a server passes the scope of the token that
//! [`token::TokenBook::authenticate`] found.

pub mod admin;
pub mod allocate;
pub mod apply;
pub mod check;
pub mod cooldown;
pub mod created;
pub mod dhcp;
pub mod diff;
pub mod dns;
pub mod doomed;
pub mod executor;
pub mod explain;
pub mod floating;
pub mod git;
pub mod hint;
pub mod history;
pub mod holders;
pub mod identity;
pub mod lease;
pub mod leases;
pub mod list;
pub mod mac;
pub mod metrics;
pub mod pool;
pub mod prefix;
pub mod quota;
pub mod quota_list;
pub mod range_holder;
pub mod reconcile;
pub mod release;
pub mod request;
pub mod scope;
pub mod scopes;
pub mod segments;
pub mod subnet;
pub mod subnet_ids;
pub mod subnet_usage;
pub mod supernet;
pub mod token;
pub mod transfer;
pub mod vpc;
pub mod warning;
