//! The numeric id a DHCP server knows a segment by (Kea's subnet `id`, dnsmasq's tag): a
//! hash of the segment's names, with a creation-order rule for collisions, and the question
//! every writer of a new pool or subnet asks so that the rule cannot be played by a name
//! chosen to collide ([`Existing::moved_by`]). Reads the store directly, below the engine's
//! other modules, so that the subnet and pool writers can ask it.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::Result;
use crate::model::{Namespace, PoolKind, PoolName, PoolRef, Timestamp};
use crate::store::read::{load_pool, read_subnet};
use crate::store::{ObjectKind, Store};

/// FNV-1a, 32 bits: a hash whose value is fixed by its definition, so an id computed today is
/// the one computed by any later ipamctl (std's hasher promises no such thing).
pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |h: u32, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

/// The text a segment's id is the hash of: `namespace \0 pool \0 subnet` (the parts cannot
/// hold a NUL, so two segments never hash the same text); empty parts for a cluster-scoped
/// pool and for a pool without subnets.
pub fn key(namespace: Option<&Namespace>, pool: &PoolName, subnet: Option<&str>) -> String {
    format!(
        "{}\0{pool}\0{}",
        namespace.map_or("", |n| n.as_str()),
        subnet.unwrap_or("")
    )
}

/// The ids of segments given as (key, creation time), in the same order: each the FNV-1a
/// hash of its key, 0 read as 1. On a collision the segment created earlier
/// (`metadata.creationTimestamp`, then the key text) keeps the hash and the later one takes
/// the next free value: adding a segment never moves an existing one's id, and ids change
/// only when a colliding segment is removed (about one chance in 8,600 among 1,000
/// segments). A segment without a time sorts first; the writers of a new pool or subnet
/// record its time exactly when it would otherwise sort before a segment whose id it would
/// take ([`Existing::moved_by`], [`crate::engine::created`]), so a name chosen to collide
/// cannot move an existing id either.
pub fn assign(keys: &[(String, Option<Timestamp>)]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..keys.len()).collect();
    order.sort_by_key(|&i| (keys[i].1, &keys[i].0));
    let mut ids = vec![0; keys.len()];
    let mut taken = BTreeSet::new();
    for i in order {
        let mut id = fnv1a(keys[i].0.as_bytes()).max(1);
        while !taken.insert(id) {
            id = id.checked_add(1).unwrap_or(1);
        }
        ids[i] = id;
    }
    ids
}

/// Every segment of the state as (key, creation time): each subnet of a pool, and each pool
/// without subnets (supernets give none), as [`crate::engine::segments`] reads them.
pub struct Existing(Vec<(String, Option<Timestamp>)>);

impl Existing {
    /// Reads every pool and subnet of every scope. A pool or subnet that does not read is
    /// left out (the exports and `check` name it).
    pub fn read(store: &dyn Store) -> Result<Existing> {
        let mut all = Vec::new();
        for ns in store.scopes()? {
            let ns = ns.as_ref();
            let mut subnets: BTreeMap<PoolName, Vec<(String, Option<Timestamp>)>> = BTreeMap::new();
            for name in store.list(ObjectKind::Subnet, ns)? {
                if let Ok(Some(s)) = read_subnet(store, ns, &name) {
                    let key = key(ns, &s.spec.pool, Some(&s.metadata.name));
                    let at = s.metadata.creation_timestamp;
                    subnets.entry(s.spec.pool).or_default().push((key, at));
                }
            }
            for name in store.list(ObjectKind::Pool, ns)? {
                let Ok(name) = PoolName::new(&name) else {
                    continue;
                };
                let pool = PoolRef {
                    namespace: ns.cloned(),
                    name,
                };
                let Ok(m) = load_pool(store, &pool) else {
                    continue;
                };
                if m.spec.kind == PoolKind::Supernet {
                    continue;
                }
                match subnets.remove(&pool.name) {
                    Some(of_pool) => all.extend(of_pool),
                    None => all.push((key(ns, &pool.name, None), m.metadata.creation_timestamp)),
                }
            }
        }
        Ok(Existing(all))
    }

    /// Whether a new segment, the pool `pool` of `namespace` (`subnet: None`, a pool without
    /// subnets) or its subnet `subnet`, written without a creation time, would move the id
    /// of an existing segment. Its writer then records the time it was created, so that it
    /// sorts after every existing segment and takes a free id.
    pub fn moved_by(
        &self,
        namespace: Option<&Namespace>,
        pool: &PoolName,
        subnet: Option<&str>,
    ) -> bool {
        let new = key(namespace, pool, subnet);
        let mut keys: Vec<(String, Option<Timestamp>)> =
            self.0.iter().filter(|(k, _)| *k != new).cloned().collect();
        let before = assign(&keys);
        keys.push((new, None));
        let after = assign(&keys);
        before.iter().zip(&after).any(|(b, a)| b != a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_is_the_published_function() {
        // The FNV test vectors: "" and "a".
        assert_eq!(fnv1a(b""), 0x811c_9dc5);
        assert_eq!(fnv1a(b"a"), 0xe40c_292c);
    }

    #[test]
    fn a_new_key_that_sorts_first_onto_a_taken_hash_moves_it() {
        let pool = |p: &str| PoolName::new(p).unwrap();
        let ns = |n: &str| Namespace::new(n).unwrap();
        // The adversarial pass's pair: they hash alike.
        let web = key(Some(&ns("lab")), &pool("hosts"), Some("web"));
        assert_eq!(fnv1a(web.as_bytes()), fnv1a(b"evil\0ceynmgdc\0"));
        let existing = Existing(vec![(web, None)]);
        assert!(existing.moved_by(Some(&ns("evil")), &pool("ceynmgdc"), None));
        assert!(!existing.moved_by(Some(&ns("evil")), &pool("other"), None));
    }
}
