//! The owner look-up of a supernet pool's prefix claims on the filesystem
//! ([`crate::store::Queries::find_prefix_owner`]): the allocations' owner index and scan
//! (`scan.rs`, [`crate::store::fs::owner::index`]), keyed by prefix instead of address.
//!
//! A look-up lists `ipprefixclaims/` once (the names give every claimed prefix) and `stat`s
//! each of the pool's files: a file whose status equals its record in
//! `.index/<ipprefixclaims dir>/<pool>.idx` is known to be the recorded owner's, every
//! other one is read (and recorded once it is old enough). So after a `git pull`, `cp`,
//! `rm` or edit the changed files are read again and the answer rests on the files as they
//! are now, exactly as for allocations ("Owner look-ups" in `queries.rs`). The caller (a
//! claim) holds the pool's lock exclusively around the look-up and its create (see "Prefix
//! claims of supernet pools" in `mod.rs`).

use std::os::fd::OwnedFd;

use ipnet::IpNet;

use crate::error::Result;
use crate::model::prefix_claim::{PrefixClaimManifest, parse_prefix_claim_name, prefix_claim_name};
use crate::model::{Namespace, Owner, PoolName, Timestamp};
use crate::store::fs::FsStore;
use crate::store::fs::beneath::{self, refused};
use crate::store::fs::owner::index::{self, Index};
use crate::store::fs::owner::kind::Kind;
use crate::store::{ObjectKind, PrefixLookup};
use crate::yaml;

/// The prefix claims of one supernet pool, keyed by prefix.
struct PrefixClaims<'a> {
    pool: &'a PoolName,
    ns: Option<&'a Namespace>,
}

impl Kind for PrefixClaims<'_> {
    type Key = IpNet;
    type Manifest = PrefixClaimManifest;
    const OBJECTS: ObjectKind = ObjectKind::PrefixClaim;

    fn name(&self, key: IpNet) -> String {
        prefix_claim_name(self.pool, key)
    }

    fn decode(text: &str) -> (std::result::Result<PrefixClaimManifest, String>, bool) {
        match yaml::decode_prefix_claim(text) {
            Ok(m) => {
                let exact = yaml::encode(&m) == text;
                (Ok(m), exact)
            }
            Err(why) => (Err(why), false),
        }
    }

    fn key_and_owner(m: &PrefixClaimManifest) -> (IpNet, &Owner) {
        (m.spec.prefix, &m.spec.owner)
    }

    fn created(m: &PrefixClaimManifest) -> Option<Timestamp> {
        m.metadata.creation_timestamp
    }

    fn canonical(
        &self,
        key: IpNet,
        owner: Owner,
        created: Option<Timestamp>,
    ) -> Option<PrefixClaimManifest> {
        let mut m = PrefixClaimManifest::new(self.pool, self.ns, key, owner);
        m.metadata.creation_timestamp = created;
        Some(m)
    }
}

impl FsStore {
    /// See [`crate::store::Queries::find_prefix_owner`].
    pub(in crate::store::fs) fn find_prefix_claim(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        owner: &Owner,
    ) -> Result<PrefixLookup> {
        let mut lookup = PrefixLookup::default();
        let Some(dir) = self.dir(ObjectKind::PrefixClaim, ns, false)? else {
            return Ok(lookup);
        };
        let kind = PrefixClaims { pool, ns };
        // The index is read while the directory is listed, as for an allocation look-up.
        let listed = std::thread::scope(|s| {
            let index: std::thread::ScopedJoinHandle<'_, Index<IpNet>> =
                s.spawn(|| self.load_index(ObjectKind::PrefixClaim, &dir, ns, pool.as_str()));
            let prefixes = self.pool_prefixes(&dir, pool);
            let index = index
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            prefixes.map(|p| (p, index))
        })?;
        let text = index::owner_text(owner);
        let (prefixes, index) = listed;
        let no_prestat = Default::default();
        let listed = (prefixes, index, &no_prestat);
        let scanned = self.scan_of(&kind, &dir, ns, pool.as_str(), listed, &|t| t == text)?;
        lookup.taken = scanned.taken;
        for (_, name, mut parsed, in_flight) in scanned.hits {
            if parsed.is_err() || in_flight {
                match self.read_whole_of::<PrefixClaims<'_>>(&dir, ns, &format!("{name}.yaml"))? {
                    Some(again) => parsed = again.parsed.map(Box::new),
                    // Removed meanwhile: nobody's.
                    None => continue,
                }
            }
            match parsed {
                Ok(m) if m.spec.owner == *owner => {
                    if m.metadata.name != name || m.spec.pool != *pool {
                        lookup.broken.push((
                            name,
                            "metadata.name or spec.pool disagrees with where it is stored (run `ipamctl check`)"
                                .into(),
                        ));
                    } else {
                        lookup.held.get_or_insert(*m);
                    }
                }
                Ok(_) => {}
                Err(why) => lookup.broken.push((name, why)),
            }
        }
        Ok(lookup)
    }

    /// The prefixes the claims of `pool` in `dir` spell, ascending. Only names of the
    /// canonical form count (see [`parse_prefix_claim_name`]), so the claim's name gives
    /// each one's file name back.
    fn pool_prefixes(&self, dir: &OwnedFd, pool: &PoolName) -> Result<Vec<IpNet>> {
        let mut prefixes = Vec::new();
        beneath::each_name(dir, |file, _| {
            if let Some(name) = file.strip_suffix(b".yaml").and_then(beneath::utf8)
                && let Some((p, net)) = parse_prefix_claim_name(name)
                && p == pool.as_str()
            {
                prefixes.push(net);
            }
        })
        .map_err(|e| refused(self.root().to_owned(), e))?;
        prefixes.sort_unstable();
        Ok(prefixes)
    }
}
