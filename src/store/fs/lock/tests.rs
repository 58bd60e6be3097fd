//! The file store's locks, tested in one process: collisions, deleted lock files, reuse of
//! a held byte, and the owner's two locks.

use std::time::Duration;

use crate::error::Error;
// By its path, not `super::*`: the same items, named as the layer check reads paths.
use crate::store::fs::lock::*;

/// The offset of `owner`'s lock in pool `public-zone-a` of the cluster scope.
fn owner_offset(owner: &str) -> i64 {
    let owner = crate::model::Owner::parse(owner, None).expect("a valid owner");
    Target::Owner {
        scope: "",
        pool: "public-zone-a",
        key: owner.key(),
    }
    .offset()
}

/// Two owners whose locks in pool `public-zone-a` share a byte: found by
/// `cargo run --release --example lock_collision` (a birthday search, about a minute),
/// and used by `tests/adversary.rs`.
const COLLIDING: [&str; 2] = ["FloatingIP/c0d869d229a8fe4b", "FloatingIP/cdf8df1ad2d92236"];

/// The constructed pair does collide, by the real hashes: different owners, different
/// keys, one byte. One process holds both owners' locks at once through one hold (an
/// OFD lock would wait for the process itself), and the byte stays held, in the file,
/// until the last of the two goes.
#[test]
fn two_owners_whose_locks_share_a_byte_share_one_hold_in_a_process() {
    let [a, b] = COLLIDING.map(|o| crate::model::Owner::parse(o, None).unwrap());
    assert_ne!(a, b);
    assert_ne!(a.key(), b.key());
    assert_eq!(owner_offset(COLLIDING[0]), owner_offset(COLLIDING[1]));
    let dir = tempfile::tempdir().unwrap();
    FsStore::init(dir.path()).unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let target = |o: &crate::model::Owner| Target::Owner {
        scope: "",
        pool: "public-zone-a",
        key: o.key(),
    };
    let first = store.lock(target(&a), LockMode::Exclusive).unwrap();
    let second = store.lock(target(&b), LockMode::Exclusive).unwrap();
    assert_eq!(store.holds(target(&a)), 2, "one byte, two holds");
    drop(first);
    assert_eq!(store.holds(target(&b)), 1, "the second hold keeps the byte");
    drop(second);
    assert_eq!(store.holds(target(&a)), 0);
}

/// The lock file deleted while a byte of it is held (`git clean -fdX`) is not made again
/// until that holder is done, so a process locking *another* byte meanwhile waits for
/// it: locked bytes of two lock files at once would let two processes into one lock.
/// Two stores are two opens, which exclude each other as two processes do.
#[test]
fn a_lock_file_deleted_while_held_is_made_again_only_after_its_holders() {
    let dir = tempfile::tempdir().unwrap();
    FsStore::init(dir.path()).unwrap();
    let first = FsStore::open(dir.path()).unwrap();
    let held = first
        .lock(Target::Scope { scope: "a" }, LockMode::Exclusive)
        .unwrap();
    let index = dir.path().join(crate::store::fs::INDEX_DIR);
    std::fs::remove_dir_all(&index).unwrap();
    let root = dir.path().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let second = FsStore::open(&root).unwrap();
        let hold = second.lock(Target::Scope { scope: "b" }, LockMode::Exclusive);
        tx.send(hold.is_ok()).unwrap();
        // Made now, by the second store, after the first let go.
        assert!(root.join(crate::store::fs::INDEX_DIR).is_dir());
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        rx.try_recv().is_err(),
        "a second lock file was made while the first was held"
    );
    assert!(
        !index.exists(),
        "the lock file was made again under a holder"
    );
    drop(held);
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
    waiter.join().unwrap();
}

/// A claim for an owner with a uid locks its name and its identity: the identity's byte
/// held (as a version before the name's lock held it) keeps the claim waiting until it
/// goes. Two stores are two opens, which exclude each other as two processes do.
#[test]
fn a_claim_for_an_owner_with_a_uid_waits_for_its_identitys_lock_too() {
    let owner = crate::model::Owner::parse(
        "VirtualMachine/vm-02/0",
        Some(crate::model::Uid::new("0f8fad5b-d9cb-469f-a165-70867728950e").unwrap()),
    )
    .unwrap();
    let pool = crate::model::PoolName::new("front").unwrap();
    let keys = |o: &crate::model::Owner| -> Vec<u64> {
        Target::owners(None, &pool, o)
            .map(|t| match t {
                Target::Owner { key, .. } => key,
                _ => unreachable!("owner locks only"),
            })
            .collect()
    };
    assert_eq!(keys(&owner), [owner.lock_key(), owner.key()]);
    let bare = crate::model::Owner::parse("VirtualMachine/vm-02/0", None).unwrap();
    assert_eq!(keys(&bare), [bare.key()]);
    let dir = tempfile::tempdir().unwrap();
    FsStore::init(dir.path()).unwrap();
    let old = FsStore::open(dir.path()).unwrap();
    let held = old
        .lock(
            Target::Owner {
                scope: "",
                pool: "front",
                key: owner.key(),
            },
            LockMode::Exclusive,
        )
        .unwrap();
    let root = dir.path().to_owned();
    let (tx, rx) = std::sync::mpsc::channel();
    let claim = std::thread::spawn(move || {
        let new = FsStore::open(&root).unwrap();
        let locks = new.lock_claim(None, std::slice::from_ref(&pool), &owner);
        tx.send(locks.is_ok()).unwrap();
    });
    std::thread::sleep(Duration::from_millis(300));
    assert!(rx.try_recv().is_err(), "the claim did not wait");
    drop(held);
    assert_eq!(rx.recv_timeout(Duration::from_secs(20)), Ok(true));
    claim.join().unwrap();
}

/// Locks of different kinds never share a byte, whatever the names: each kind has its
/// own quarter of the offset range.
#[test]
fn kinds_lie_in_disjoint_quarters_of_the_offset_range() {
    for i in 0..2000u64 {
        let (scope, pool) = (format!("ns-{}", i % 7), format!("p{i}"));
        let quarter = |t: Target<'_>| t.offset() >> 60;
        assert_eq!(
            quarter(Target::Pool {
                scope: &scope,
                pool: &pool
            }),
            0
        );
        assert_eq!(quarter(Target::Scope { scope: &scope }), 1);
        let owner = Target::Owner {
            scope: &scope,
            pool: &pool,
            key: i.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        };
        assert_eq!(quarter(owner), 2);
        assert!(owner.offset() > 0);
    }
}

/// A byte this process holds is reused, not waited for (an OFD lock would wait for the
/// process itself, for ever): the same target twice is the extreme of two targets that
/// hash to one byte. Asking exclusively for a byte held shared is refused.
#[test]
fn a_byte_the_process_holds_is_reused_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    FsStore::init(dir.path()).unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let pool = Target::Pool {
        scope: "",
        pool: "p",
    };
    let first = store.lock(pool, LockMode::Exclusive).unwrap();
    let second = store.lock(pool, LockMode::Exclusive).unwrap();
    drop(first);
    // Still held through `second`: another store (another open) cannot have it.
    let other = FsStore::open(dir.path()).unwrap();
    let shared = Target::Scope { scope: "" };
    let _s = other.lock(shared, LockMode::Shared).unwrap();
    assert!(matches!(
        other.lock(shared, LockMode::Exclusive),
        Err(Error::Io { .. })
    ));
    drop(second);
    let _again = other.lock(pool, LockMode::Exclusive).unwrap();
}
