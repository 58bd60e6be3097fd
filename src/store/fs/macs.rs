//! MAC records: the file store's arbiter of "a MAC is held by at most one allocation of a
//! pool" (`spec.mac`), as the allocation's file name is the arbiter of its address.
//!
//! ```text
//! <scope>/macs/<pool>-<mac as 12 lowercase hex digits>     `<address>\n` of the holder
//! ```
//!
//! The name is injective: a MAC is exactly twelve hex digits after the last `-`, and a pool
//! name never ends in `-`, so (pool, MAC) is read back from the name alone
//! (as the unit test's `parse_record_name` shows). The record is a tracked file beside the manifests, never in the
//! ignored `.index/`: `git clean -fdX` leaves it, and a clone that commits it carries it
//! (two clones that gave one MAC to two allocations then meet in a merge conflict on it,
//! besides `check`'s report). It names only the address: who holds the MAC is always read
//! from that allocation's own file, so a record that names a file no longer holding the
//! MAC holds nothing.
//!
//! # A claim with a MAC, step by step
//!
//! The claim's caller holds the owner's claim lock ([`crate::store::Locks::lock_claim`]);
//! other owners' claims of the same MAC run beside it.
//! 0. Read the MAC's record: if it names another allocation that holds the MAC, refuse now,
//!    having written nothing ([`FsStore::held_elsewhere`]; `mac set` does the same).
//! 1. Create the allocation's file exclusively (`claims.rs`): the address is ours, and the
//!    file already says which MAC it holds. Closes the address race, as without a MAC.
//! 2. Read the MAC's record; where there is none, create it exclusively, naming that
//!    address ([`beneath::write`], create-only, durable; refused, the record made meanwhile
//!    is read). Of all claimers of one MAC at once, exactly one creates it:
//!    this is the arbiter. Because every writer makes the allocation *before* the record,
//!    a record whose allocation holds the MAC is never a claim half made.
//! 3. There is a record. It names an allocation that holds the MAC (read
//!    now): that allocation is the holder; our file is undone (deleted only if it is still
//!    our bytes, [`beneath::remove_if`]) and the claim answers [`crate::store::Claim::MacHeld`]. It names
//!    our own address: it is ours (a claim retried after a crash between steps 1 and 2).
//! 4. It names an allocation that does not hold the MAC (released with a crash between its
//!    two deletes, or changed by hand): a stale record. Before taking it over, every
//!    allocation of the pool is read for the MAC (the rare path: a release deletes its
//!    record), so that a holder whose record went missing is found and answered; else the
//!    stale record is deleted only if it is still the bytes judged stale ([`beneath::remove_if`])
//!    and step 2 runs again. Two takers of one stale record cannot both win: the second's
//!    delete finds the first's new record (other bytes) and keeps it, and its create fails.
//! 5. After taking a stale record over, read the allocation it named once more: a holder
//!    that was away for an instant while step 4 judged it (a `git checkout` relabelling its
//!    file: unlink, then create) and is back now is the holder after all: this claim's
//!    record is deleted (only if still its bytes), the stale one put back, and the claim
//!    answers [`crate::store::Claim::MacHeld`]. The owner look-up's re-check narrows the same window
//!    (`claims.rs`). In steps 4 and 5 an allocation that is missing or does not parse is read
//!    again for up to half a second before it is believed gone (a relabelling's unlink,
//!    create and write take microseconds); a relabelling that stays away longer than that,
//!    across steps 4 and 5, is left (`check` reports).
//!
//! A release deletes the allocation first and the record after, only if the record still
//! names the released address; `mac set` rewrites the allocation first and then takes the
//! new record as a claim does (rewriting the allocation back if another holds it), then
//! drops the old one. A kill between any two steps leaves at worst a record that names a
//! file without its MAC, which step 4 takes over, or an allocation with a MAC and no record
//! (killed between steps 1 and 2). The owner asking again makes that record
//! ([`crate::store::Claims::claim_mac`], on every answer that the owner holds its address
//! already: one read when the record is there); until then another owner's claim of the
//! MAC finds no record and wins it, which `check` reports (`tests/cli_mac.rs` kills a claim
//! there).
//!
//! # What an outside writer can still do
//!
//! - Delete a live record (`rm`, or a `git checkout` that relabels it: unlink, then create)
//!   and have another owner claim the same MAC in that gap: the claim finds no record, and
//!   makes its own. Narrowed by nothing here (the claim would have to read the whole pool
//!   every time); `ipamctl check` reports the MAC held twice, naming both. A `cp` of the
//!   record over itself (the same bytes) changes nothing.
//! - Write a record that names another allocation of the MAC's holder's pool (a copy from
//!   another clone): step 4 reads the pool before believing it stale.
//! - Relabel a holder's allocation file (unlink, then create) while another owner claims its
//!   MAC: if the claim's exclusive create lands in the gap, the address was free and is now
//!   the claimer's, and the record naming that address names the claimer's allocation; the
//!   relabelling's create then fails. The MAC stays on one allocation (the claimer's);
//!   the holder's file is the checkout's to restore. `tests/mac_outside.rs` counts these
//!   (about one run in ten has one) and checks that no MAC is ever on two allocations.
//! - Give a MAC to a second allocation by hand, or merge two clones that did: nothing on
//!   disk refuses it; `check` reports it.

use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::mac::Mac;
use crate::model::{AllocationManifest, Namespace, OwnerFilter, PoolName};
use crate::store::fs::FsStore;
use crate::store::fs::beneath::{self, Removed, WriteMode};
use crate::store::fs::objects::write_error;
use crate::store::{ObjectKind, Objects, Queries};
use crate::yaml;

/// The directory of MAC records in each scope, beside `ipallocations/`: a segment no
/// namespace may take ([`crate::model::layout::ScopeDir::Macs`]).
pub const MACS_DIR: &str = crate::model::layout::ScopeDir::Macs.name();

/// How long a stale record's allocation must stay missing (or unparsable) before the record
/// is believed stale: far longer than the unlink-to-write gap of a relabelling checkout,
/// even on a loaded machine; paid only on the rare stale path (`tests/mac_outside.rs`
/// failed once in seven runs without it, after the merge of this stop).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// How often [`SETTLE`]'s re-reads look.
const SETTLE_STEP: std::time::Duration = std::time::Duration::from_millis(10);

/// How many times a claim takes a stale record over before it gives up (each time another
/// taker won the record and then turned out stale too: only a writer in a loop does that).
const TAKEOVERS: usize = 8;

/// The record's file name of `mac` in `pool`: `<pool>-<12 hex digits>`.
pub fn record_name(pool: &PoolName, mac: Mac) -> String {
    let mut name = format!("{pool}-");
    for octet in mac.octets() {
        name.push_str(&format!("{octet:02x}"));
    }
    name
}

/// The address a record's bytes name, if they are a record.
pub fn parse_record(bytes: &[u8]) -> Option<IpAddr> {
    std::str::from_utf8(bytes)
        .ok()?
        .trim_end_matches('\n')
        .parse()
        .ok()
}

impl FsStore {
    fn macs_dir(&self, ns: Option<&Namespace>, create: bool) -> Result<Option<Arc<OwnedFd>>> {
        let mut rel = FsStore::relative_dir(ObjectKind::Allocation, ns);
        rel.set_file_name(MACS_DIR);
        self.dir_at(rel, create)
    }

    fn record_path(&self, ns: Option<&Namespace>, name: &str) -> PathBuf {
        let mut rel = FsStore::relative_dir(ObjectKind::Allocation, ns);
        rel.set_file_name(MACS_DIR);
        self.root.join(rel).join(name)
    }

    /// Step 0, before step 1 writes anything: the allocation that holds `manifest`'s MAC
    /// by its record now, if one other than `manifest`'s address does (one read of the
    /// record and one of the file it names). A claim or `mac set` of a MAC held elsewhere
    /// is then refused without writing its file first: a kill between that write and its
    /// undo would leave the MAC on two allocations. Anything else (no record, a stale one,
    /// one that cannot be read) is for [`FsStore::take_mac`] to decide.
    pub(super) fn held_elsewhere(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let dir = match spec.mac {
            Some(_) => self.macs_dir(ns, false)?,
            None => None,
        };
        let (Some(mac), Some(dir)) = (spec.mac, dir) else {
            return Ok(None);
        };
        let read = beneath::read(&*dir, record_name(&spec.pool, mac), 4096);
        let named = match read {
            Ok(Some(read)) => parse_record(&read.bytes),
            _ => None,
        };
        let Some(address) = named.filter(|a| *a != spec.address) else {
            return Ok(None);
        };
        let holder = crate::model::allocation_name(&spec.pool, address);
        let found = crate::store::read::read_allocation(self, ns, &holder)?;
        Ok(found
            .and_then(|m| m.ok())
            .filter(|m| m.spec.mac == Some(mac) && m.spec.address == address))
    }

    /// Steps 2 to 4 of the module docs for `manifest` (whose file step 1 created): `None`
    /// when the MAC's record names `manifest`'s address now (or it has no MAC), else the
    /// allocation that holds the MAC.
    pub(super) fn take_mac(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let Some(mac) = spec.mac else {
            return Ok(None);
        };
        failpoint!("before-mac-take");
        let dir = self.macs_dir(ns, true)?.expect("created");
        let name = record_name(&spec.pool, mac);
        let path = || self.record_path(ns, &name);
        let text = format!("{}\n", spec.address);
        // The stale record this claim took over, if any: (its bytes, the address it named).
        let mut took: Option<(Vec<u8>, IpAddr)> = None;
        for _ in 0..TAKEOVERS {
            // Read first: a record that names this address already (a retried claim, an
            // owner asking again) costs one read, not a durable write.
            let read = beneath::read(&*dir, &name, 4096).map_err(|e| write_error(path(), e))?;
            let Some(read) = read else {
                failpoint!("claim-before-mac-record");
                let created = beneath::write(
                    &*dir,
                    &name,
                    text.as_bytes(),
                    WriteMode::CreateOnly,
                    true,
                    &|| self.scratch(),
                )
                .map_err(|e| write_error(path(), e))?;
                if !created {
                    continue; // another claimer's, just made: judge it
                }
                // Step 5: the holder the stale record named may have been away for an
                // instant (a checkout relabelling its file: unlink, then create) while this
                // claim judged it; back now, it is the holder, and the record names it again.
                if let Some((stale, address)) = took
                    && let Some(holder) = self.holding_at(ns, &spec.pool, address, mac)?
                {
                    beneath::remove_if(&*dir, &name, true, &mut |t| t.bytes == text.as_bytes())
                        .map_err(|e| write_error(path(), e))?;
                    beneath::write(&*dir, &name, &stale, WriteMode::CreateOnly, true, &|| {
                        self.scratch()
                    })
                    .map_err(|e| write_error(path(), e))?;
                    return Ok(Some(holder));
                }
                return Ok(None);
            };
            let named = parse_record(&read.bytes);
            if named == Some(spec.address) {
                return Ok(None);
            }
            if let Some(address) = named
                && let Some(holder) = self.holding_at(ns, &spec.pool, address, mac)?
            {
                return Ok(Some(holder));
            }
            if let Some(holder) = self.holding_in_pool(ns, &spec.pool, mac, spec.address)? {
                return Ok(Some(holder));
            }
            let stale = read.bytes;
            let removed = beneath::remove_if(&*dir, &name, true, &mut |taken| taken.bytes == stale)
                .map_err(|e| write_error(path(), e))?;
            if removed == Removed::Deleted
                && let Some(address) = named
            {
                took = Some((stale, address));
            }
        }
        Err(Error::conflict(format!(
            "the record of MAC {mac} in pool `{}` ({}) kept changing while it was claimed; try again",
            spec.pool,
            path().display()
        )))
    }

    /// Deletes the record of `mac` in `pool` if it names `address` (a release of that
    /// allocation, or its MAC changed): any other record is left.
    pub(super) fn drop_mac(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mac: Mac,
        address: IpAddr,
    ) -> Result<()> {
        let Some(dir) = self.macs_dir(ns, false)? else {
            return Ok(());
        };
        let name = record_name(pool, mac);
        beneath::remove_if(&*dir, &name, true, &mut |taken| {
            parse_record(&taken.bytes) == Some(address)
        })
        .map_err(|e| write_error(self.record_path(ns, &name), e))?;
        Ok(())
    }

    /// Deletes `manifest`'s file if it still holds exactly its bytes (a claim undone).
    pub(super) fn undo_claim(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<()> {
        let bytes = yaml::encode(manifest);
        let mut ours = |now: &[u8]| now == bytes.as_bytes();
        self.delete_if(
            ObjectKind::Allocation,
            ns,
            &manifest.metadata.name,
            &mut ours,
        )?;
        Ok(())
    }

    /// The allocation at `address` of `pool` if it holds `mac`. A file that is missing or
    /// does not parse may be one a `git checkout` is relabelling (unlink, create, write):
    /// it is read again, every [`SETTLE_STEP`] for up to [`SETTLE`], before it is believed
    /// gone; a file that parses answers at once. Only the stale-record path and its re-check
    /// (steps 4 and 5) call this, so a live holder's claims never wait.
    fn holding_at(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        address: IpAddr,
        mac: Mac,
    ) -> Result<Option<AllocationManifest>> {
        let name = crate::model::allocation_name(pool, address);
        let deadline = std::time::Instant::now() + SETTLE;
        loop {
            match crate::store::read::read_allocation(self, ns, &name)? {
                Some(Ok(m)) => {
                    let holds = m.spec.mac == Some(mac) && m.spec.address == address;
                    return Ok(holds.then_some(m));
                }
                // Missing or torn: perhaps mid-relabel; look again, boundedly.
                None | Some(Err(_)) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(SETTLE_STEP);
                }
                None | Some(Err(_)) => return Ok(None),
            }
        }
    }

    /// An allocation of `pool` other than the one at `except` that holds `mac`, reading
    /// every allocation of the pool.
    fn holding_in_pool(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mac: Mac,
        except: IpAddr,
    ) -> Result<Option<AllocationManifest>> {
        let found = self.find_allocations(ns, Some(pool), &OwnerFilter::default())?;
        Ok(found.into_iter().find_map(|f| match f.parsed {
            Ok(m) if m.spec.mac == Some(mac) && m.spec.address != except => Some(m),
            _ => None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::fs::macs::*;

    /// The (pool, MAC) a record's file name spells, if it is one.
    pub fn parse_record_name(name: &str) -> Option<(&str, Mac)> {
        let (pool, hex) = name.rsplit_once('-')?;
        if pool.is_empty()
            || hex.len() != 12
            || !hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        {
            return None;
        }
        Some((pool, Mac::parse(hex).ok()?))
    }

    #[test]
    fn record_names_read_back_to_their_pool_and_mac() {
        let pool = PoolName::new("vpc-a-v6").unwrap();
        let mac = Mac::parse("52:54:00:0a:0b:0c").unwrap();
        let name = record_name(&pool, mac);
        assert_eq!(name, "vpc-a-v6-5254000a0b0c");
        assert_eq!(parse_record_name(&name), Some(("vpc-a-v6", mac)));
        for bad in [
            "vpc-5254000a0b0",
            "-5254000a0b0c",
            "vpc-5254000A0B0C",
            "vpc",
        ] {
            assert_eq!(parse_record_name(bad), None, "{bad}");
        }
        assert_eq!(parse_record(b"10.0.0.1\n"), "10.0.0.1".parse().ok());
        assert_eq!(parse_record(b"x"), None);
    }
}
