//! MAC records: the file store's arbiter of "a MAC is held by at most one allocation of a
//! pool" (`spec.mac`), as the allocation's file name is the arbiter of its address.
//!
//! ```text
//! <scope>/macs/<pool>-<mac as 12 lowercase hex digits>
//!     <address>\n<owner kind> <owner name> <uid or ->\n      of the claim that holds it
//! ```
//!
//! The name is injective: a MAC is exactly twelve hex digits after the last `-`, and a pool
//! name never ends in `-`, so (pool, MAC) is read back from the name alone (as the unit
//! test's `parse_record_name` shows); `macs` is a reserved name segment, so no namespace
//! shares the directory. The record is a tracked file beside the manifests, never in the
//! ignored `.index/`: `git clean -fdX` leaves it, and a clone that commits it carries it
//! (two clones that gave one MAC to two allocations then meet in a merge conflict on it,
//! besides `check`'s report).
//!
//! A record names the claim that holds the MAC: its address *and its owner identity* (kind,
//! name, uid). Who holds the MAC is still read from that allocation's own file; the owner in
//! the record is what lets every step that keeps or deletes a record tell whose it is. A
//! record that named only an address could not: a release deleted its allocation and then
//! "its" record, and a claim of the same MAC by another owner that was given the freed
//! address in between found a record naming its own address, kept it, and lost it to the
//! release's delete; a third owner then found no record and won the MAC (issue 46: one MAC
//! on two allocations with plain commands). Records of older versions (the address alone)
//! are read as naming no owner.
//!
//! # A claim with a MAC, step by step
//!
//! The claim's caller holds the owner's claim lock ([`crate::store::Locks::lock_claim`]);
//! other owners' claims of the same MAC run beside it. **The record comes first, the
//! allocation after**, so that an allocation ipamctl wrote with a MAC always has the
//! record that guards it, at every instant, whatever kills the process.
//! 1. Read the MAC's record ([`FsStore::take_mac`]).
//!    - None: the record is created exclusively, naming this claim ([`beneath::write`],
//!      create-only, durable). Of all claimers of one MAC at once, exactly one creates it:
//!      this is the arbiter. Refused, the record made meanwhile is judged. Made, every
//!      allocation of the pool is then read for the MAC (a file that does not parse is read
//!      again whole): the MAC may still be held by an allocation whose record an outside
//!      writer deleted (`rm`), or that an older version wrote before its record. A holder
//!      found is answered [`crate::store::Claim::MacHeld`], and this claim's record deleted
//!      (only if still its bytes). The pool is read *after* the record is made, never
//!      before: an allocation that holds the MAC by then is seen, and one made after is a
//!      claim's that reads the record after its allocation (step 4) and finds this one's.
//!      Read before (as until issue 42's session), a holder whose record `rm` deleted
//!      between that read and the create went unseen, and the MAC was on two allocations.
//!    - It names this claim's owner: it is ours (a claim of ours killed before its
//!      allocation, or retried after another address was taken): it is rewritten to name
//!      this address if it names another. Nobody else changes a record naming an owner
//!      while that owner's lock is held (below).
//!    - It names another owner whose allocation at the named address holds the MAC: that
//!      allocation is the holder; nothing is written and the claim answers
//!      [`crate::store::Claim::MacHeld`].
//!    - It names another owner that holds no such allocation: either that owner's claim,
//!      release or `mac set` is in flight (its record is made before its allocation, and
//!      deleted after it), or it died there, or the record is stale. Which of these is
//!      told by that owner's lock in the pool, held by every one of those operations from
//!      before its first write to after its last: the claim takes it (a bounded wait). Held
//!      by us, the record is read again (changed: judged anew), the named allocation read
//!      again (a holder found now is answered), every allocation of the pool read for the
//!      MAC, and only then is the record deleted, if it is still the bytes judged stale
//!      ([`beneath::remove_if`]), and the step runs again.
//! 2. Create the allocation's file exclusively (`claims.rs`): the address is ours. Taken,
//!    the record is deleted (only if it still names this claim) and the engine tries the
//!    next address, which makes the record again.
//! 3. After taking a stale record over, the allocation it named is read once more before
//!    step 2: a holder that was away for an instant while step 1 judged it (a `git
//!    checkout` relabelling its file: unlink, then create) and is back now is the holder
//!    after all: this claim's record is deleted (only if still its bytes), the stale one
//!    put back, and the claim answers [`crate::store::Claim::MacHeld`]. The owner look-up's
//!    re-check narrows the same window (`claims.rs`). An allocation that is missing or does
//!    not parse is read again for up to half a second before it is believed gone (a
//!    relabelling's unlink, create and write take microseconds).
//! 4. After step 2, the record is read once more ([`FsStore::confirm_mac`]): it still names
//!    this claim, but for an outside writer that copied an older record over it (another
//!    clone's, a backup) while the claim was between its record and its allocation. Then it
//!    is judged as in step 1 with the claim's allocation in place: a holder named by it is
//!    the holder, and the claim takes its allocation back (deleted only if still its
//!    bytes) and answers [`crate::store::Claim::MacHeld`]; otherwise the record is made to
//!    name this claim again. Without it, a claim of the MAC judging the copied record in
//!    that window found no holder in the pool (this claim's allocation was not there yet)
//!    and was given the MAC too.
//!
//! A release deletes the allocation first and the record after, only if the record still
//! names the released owner; `mac set` takes the new MAC's record as a claim does, then
//! rewrites the allocation, then deletes the old MAC's record if it names the owner. Each
//! holds the owner's lock throughout. So a kill at any instant leaves at worst a record
//! naming an owner that holds no allocation with its MAC, whose lock is free: step 1 takes
//! it over. It never leaves an allocation with a MAC and no record (`tests/mac_kill.rs`
//! kills claims, releases and `mac set` at every step and at random).
//!
//! Two claims that each wait for the other's owner's lock (each claiming a MAC whose
//! record names the other's owner, at once) wait until the lock timeout and fail (exit 1),
//! having written nothing; asked again, each is answered.
//!
//! # What an outside writer can still do
//!
//! - Delete a live record (`rm`): the next claim of the MAC makes the record and then reads
//!   the pool, and finds the holder (step 1). `check` warns of an allocation whose MAC has
//!   no record, and `check --fix` makes the record again.
//! - Delete or replace the record of a claim that is between its record and its allocation
//!   (steps 1 and 2), while the process of that claim is killed before step 4: another
//!   owner's claim found no holder and made the record its own, and the killed claim's
//!   allocation lands after. No order of writes closes this: whichever of the two is
//!   checked last, the outside writer can act after the check and the kill before the next
//!   one. The killed claim was never answered, and nothing later trusts its allocation's
//!   MAC: the record names the other holder, so a retry of the killed owner answers exit 4
//!   naming it ([`crate::engine::mac::check_held`]), every other claim is refused, and the
//!   exports refuse the MAC held twice. `check` reports it as an error and `check --fix`
//!   settles it ([`crate::engine::mac::settle`]): the MAC stays on the allocation the record
//!   names and is removed from the other, which keeps its address. `tests/mac_race.rs`
//!   (`IPAMCTL_MAC_STORM=all`) counts these and sees `check --fix` settle each.
//! - Write a record that names another allocation of the MAC's holder's pool (a copy from
//!   another clone): step 1 reads the pool before believing it stale.
//! - Relabel a holder's allocation file (unlink, then create) while another owner claims its
//!   MAC: step 3 narrows it; if the claim's exclusive create lands in the gap, the address
//!   was free and is now the claimer's, and the MAC stays on one allocation (the
//!   claimer's); the holder's file is the checkout's to restore. `tests/mac_outside.rs`
//!   counts these and checks that no MAC is ever on two allocations.
//! - Give a MAC to a second allocation by hand, or merge two clones that did: nothing on
//!   disk refuses it; `check` reports it.

use std::net::IpAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::mac::Mac;
use crate::model::{AllocationManifest, Namespace, Owner, OwnerFilter, PoolName, Uid};
use crate::store::fs::FsStore;
use crate::store::fs::beneath::{self, Removed, WriteMode};
use crate::store::fs::lock::Target;
use crate::store::fs::objects::write_error;
use crate::store::fs::owner::index::owner_text;
use crate::store::{LockMode, Queries};

/// The directory of MAC records in each scope, beside `ipallocations/`: a segment no
/// namespace may take ([`crate::model::layout::ScopeDir::Macs`]).
pub const MACS_DIR: &str = crate::model::layout::ScopeDir::Macs.name();

/// How long a stale record's allocation must stay missing (or unparsable) before the record
/// is believed stale: far longer than the unlink-to-write gap of a relabelling checkout,
/// even on a loaded machine; paid only on the rare stale path (`tests/mac_outside.rs`
/// failed once in seven runs without it).
const SETTLE: std::time::Duration = std::time::Duration::from_millis(500);

/// How often [`SETTLE`]'s re-reads look.
const SETTLE_STEP: std::time::Duration = std::time::Duration::from_millis(10);

/// How many times a claim judges the record anew before it gives up (each time another
/// taker changed the record meanwhile: only a writer in a loop does that).
const TAKEOVERS: usize = 8;

/// The record's file name of `mac` in `pool`: `<pool>-<12 hex digits>`.
pub fn record_name(pool: &PoolName, mac: Mac) -> String {
    let mut name = format!("{pool}-");
    for octet in mac.octets() {
        name.push_str(&format!("{octet:02x}"));
    }
    name
}

/// What a MAC record says: the claim that holds the MAC.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MacRecord {
    /// The holding allocation's address.
    pub address: IpAddr,
    /// Its owner, as [`owner_text`] writes it (`<kind> <name> <uid or ->`); `None` in a
    /// record an older version wrote (the address alone).
    pub owner: Option<String>,
}

impl MacRecord {
    /// The record of `m`'s claim.
    pub fn of(m: &AllocationManifest) -> MacRecord {
        MacRecord {
            address: m.spec.address,
            owner: Some(owner_text(&m.spec.owner)),
        }
    }

    /// Its bytes: `<address>\n<owner>\n`.
    pub fn text(&self) -> String {
        match &self.owner {
            Some(owner) => format!("{}\n{owner}\n", self.address),
            None => format!("{}\n", self.address),
        }
    }

    /// A record's bytes read back, if they are one.
    pub fn parse(bytes: &[u8]) -> Option<MacRecord> {
        let text = std::str::from_utf8(bytes).ok()?;
        let mut lines = text.strip_suffix('\n').unwrap_or(text).split('\n');
        let address = lines.next()?.parse().ok()?;
        let owner = match lines.next() {
            None => None,
            Some(owner) if owner.split(' ').count() == 3 => Some(owner.to_owned()),
            Some(_) => return None,
        };
        lines
            .next()
            .is_none()
            .then_some(MacRecord { address, owner })
    }

    /// Does it name `owner` (the same kind, name and uid)? A record of an older version
    /// names nobody.
    pub fn names(&self, owner: &Owner) -> bool {
        self.owner.as_deref() == Some(owner_text(owner).as_str())
    }

    /// The owner it names, if it names one that parses.
    fn named_owner(&self) -> Option<Owner> {
        let mut fields = self.owner.as_deref()?.split(' ');
        let (kind, name, uid) = (fields.next()?, fields.next()?, fields.next()?);
        let uid = match uid {
            "-" => None,
            uid => Some(Uid::new(uid).ok()?),
        };
        Owner::new(kind.parse().ok()?, name, uid).ok()
    }
}

/// Is `m` the allocation of `claim` (its address, for its owner)?
fn is_claim(m: &AllocationManifest, claim: &AllocationManifest) -> bool {
    m.spec.address == claim.spec.address && m.spec.owner == claim.spec.owner
}

/// The address a record's bytes name, if they are a record.
pub fn parse_record(bytes: &[u8]) -> Option<IpAddr> {
    MacRecord::parse(bytes).map(|r| r.address)
}

impl FsStore {
    fn macs_dir(&self, ns: Option<&Namespace>, create: bool) -> Result<Option<Arc<OwnedFd>>> {
        let mut rel = FsStore::relative_dir(crate::store::ObjectKind::Allocation, ns);
        rel.set_file_name(MACS_DIR);
        self.dir_at(rel, create)
    }

    fn record_path(&self, ns: Option<&Namespace>, name: &str) -> PathBuf {
        let mut rel = FsStore::relative_dir(crate::store::ObjectKind::Allocation, ns);
        rel.set_file_name(MACS_DIR);
        self.root.join(rel).join(name)
    }

    /// Step 1 of the module docs for `manifest`, before its allocation is written (or, for
    /// an allocation its owner holds already, to make a record that went missing): `None`
    /// when the MAC's record names `manifest`'s claim now (or it has no MAC), else the
    /// allocation that holds the MAC, with nothing written. The caller holds the lock of
    /// `manifest`'s owner in the pool (a bulk copy holds none: nothing else runs beside it).
    // Length: one loop over the record's states (none, ours, a holder's, in flight or stale),
    // in the order the module docs give them; what a pass learns (the pool read, the stale
    // record taken over) is carried to the next, and split apart each case would hide it.
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
        let ours = MacRecord::of(manifest);
        let text = ours.text();
        let write = |bytes: &[u8], mode| {
            beneath::write(&*dir, &name, bytes, mode, true, &|| self.scratch())
                .map_err(|e| write_error(path(), e))
        };
        // The stale record this claim took over, if any: (its bytes, the address it named).
        let mut took: Option<(Vec<u8>, IpAddr)> = None;
        for _ in 0..TAKEOVERS {
            // Read first: a record that names this claim already (a retried claim, an owner
            // asking again) costs one read, not a durable write.
            let read = beneath::read(&*dir, &name, 4096).map_err(|e| write_error(path(), e))?;
            let Some(read) = read else {
                failpoint!("claim-before-mac-record");
                let created = write(text.as_bytes(), WriteMode::CreateOnly)?;
                if !created {
                    continue; // another claimer's, just made: judge it
                }
                failpoint!("mac-record-made");
                // The pool is read for another holder *after* the record is ours, never
                // before: an allocation that holds the MAC by then is seen, and one made
                // after belongs to a claim that reads the record after its allocation
                // (step 4) and finds this one's. Read before, a holder whose record an
                // outside `rm` deleted between that read and this create went unseen.
                if let Some(holder) = self.holding_in_pool(ns, manifest)? {
                    beneath::remove_if(&*dir, &name, true, &mut |t| t.bytes == text.as_bytes())
                        .map_err(|e| write_error(path(), e))?;
                    if let Some((stale, _)) = took {
                        write(&stale, WriteMode::CreateOnly)?;
                    }
                    return Ok(Some(holder));
                }
                // Step 3: the holder the stale record named may have been away for an
                // instant (a checkout relabelling its file: unlink, then create) while this
                // claim judged it; back now, it is the holder, and the record names it again.
                if let Some((stale, address)) = took
                    && let Some(holder) = self.holding_at(ns, &spec.pool, address, mac)?
                {
                    beneath::remove_if(&*dir, &name, true, &mut |t| t.bytes == text.as_bytes())
                        .map_err(|e| write_error(path(), e))?;
                    write(&stale, WriteMode::CreateOnly)?;
                    return Ok(Some(holder));
                }
                return Ok(None);
            };
            let record = MacRecord::parse(&read.bytes);
            if let Some(record) = &record
                && record.names(&spec.owner)
            {
                // Ours: only this owner's operations, under the lock its caller holds, write
                // a record naming it.
                if record.address != spec.address {
                    write(text.as_bytes(), WriteMode::Replace)?;
                }
                return Ok(None);
            }
            if let Some(holder) = self.record_holder(ns, &spec.pool, mac, record.as_ref())? {
                if is_claim(&holder, manifest) {
                    // This very allocation, under an older version's record (the address
                    // alone): named anew, with its owner.
                    write(text.as_bytes(), WriteMode::Replace)?;
                    return Ok(None);
                }
                return Ok(Some(holder));
            }
            // No holder where the record says: in flight, dead or stale. Its owner's lock
            // tells: every operation that writes a record naming an owner holds that lock
            // from before its first write to after its last.
            let _named = match record.as_ref().and_then(MacRecord::named_owner) {
                Some(owner) => {
                    Some(self.lock(Target::owner(ns, &spec.pool, &owner), LockMode::Exclusive)?)
                }
                None => None,
            };
            failpoint!("mac-judged-stale");
            let again = beneath::read(&*dir, &name, 4096).map_err(|e| write_error(path(), e))?;
            if again.as_ref().is_none_or(|a| a.bytes != read.bytes) {
                continue; // changed while the lock was waited for: judge it anew
            }
            if let Some(holder) = self.record_holder(ns, &spec.pool, mac, record.as_ref())? {
                return Ok(Some(holder));
            }
            // Stale: taken over. The pool is read for another holder once the record is
            // this claim's (above).
            let stale = read.bytes;
            let removed = beneath::remove_if(&*dir, &name, true, &mut |taken| taken.bytes == stale)
                .map_err(|e| write_error(path(), e))?;
            if removed == Removed::Deleted
                && let Some(record) = record
            {
                took = Some((stale, record.address));
            }
        }
        Err(Error::conflict(format!(
            "the record of MAC {mac} in pool `{}` ({}) kept changing while it was claimed; try again",
            spec.pool,
            path().display()
        )))
    }

    /// Step 4 of the module docs, once `manifest`'s allocation is written (a claim's file, or
    /// `mac set`'s rewrite): `None` while the MAC's record still names this claim (one read),
    /// else what [`FsStore::take_mac`] says of the record now, judged with this allocation in
    /// place: `Some` is the holder, and the caller takes its allocation back.
    pub(super) fn confirm_mac(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let Some(mac) = spec.mac else {
            return Ok(None);
        };
        let dir = self.macs_dir(ns, true)?.expect("created");
        let name = record_name(&spec.pool, mac);
        let read = beneath::read(&*dir, &name, 4096)
            .map_err(|e| write_error(self.record_path(ns, &name), e))?;
        let ours = read
            .and_then(|r| MacRecord::parse(&r.bytes))
            .is_some_and(|r| r.names(&spec.owner) && r.address == spec.address);
        if ours {
            return Ok(None);
        }
        failpoint!("mac-confirm-changed");
        self.take_mac(ns, manifest)
    }

    /// The allocation a record names, if it holds the MAC (and, where the record names an
    /// owner, is that owner's).
    fn record_holder(
        &self,
        ns: Option<&Namespace>,
        pool: &PoolName,
        mac: Mac,
        record: Option<&MacRecord>,
    ) -> Result<Option<AllocationManifest>> {
        let Some(record) = record else {
            return Ok(None);
        };
        let holder = self.holding_at(ns, pool, record.address, mac)?;
        Ok(holder.filter(|m| record.owner.is_none() || record.names(&m.spec.owner)))
    }

    /// Deletes the record of `m`'s MAC if it names `m`'s owner (a release of `m`, its MAC
    /// changed, or its claim undone; an older version's record: if it names `m`'s
    /// address). Any other record is left: it is another claim's.
    pub(super) fn drop_mac(&self, ns: Option<&Namespace>, m: &AllocationManifest) -> Result<()> {
        let Some(mac) = m.spec.mac else {
            return Ok(());
        };
        let Some(dir) = self.macs_dir(ns, false)? else {
            return Ok(());
        };
        let name = record_name(&m.spec.pool, mac);
        beneath::remove_if(&*dir, &name, true, &mut |taken| {
            MacRecord::parse(&taken.bytes).is_some_and(|r| match r.owner {
                Some(_) => r.names(&m.spec.owner),
                None => r.address == m.spec.address,
            })
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
        let bytes = crate::yaml::encode(manifest);
        let mut ours = |now: &[u8]| now == bytes.as_bytes();
        crate::store::Objects::delete_if(
            self,
            crate::store::ObjectKind::Allocation,
            ns,
            &manifest.metadata.name,
            &mut ours,
        )?;
        Ok(())
    }

    /// The allocation at `address` of `pool` if it holds `mac`. A file that is missing or
    /// does not parse may be one a `git checkout` is relabelling (unlink, create, write):
    /// it is read again, every [`SETTLE_STEP`] for up to [`SETTLE`], before it is believed
    /// gone; a file that parses answers at once. Only the stale-record path calls this, so
    /// a live holder's claims never wait.
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

    /// An allocation of `manifest`'s pool that holds its MAC, other than `manifest`'s own
    /// claim, reading every allocation of the pool. A file that does not parse (one `cp` or
    /// an editor is rewriting in place) is read again whole before it is passed over: it
    /// may be the holder.
    fn holding_in_pool(
        &self,
        ns: Option<&Namespace>,
        manifest: &AllocationManifest,
    ) -> Result<Option<AllocationManifest>> {
        let spec = &manifest.spec;
        let holds = |m: &AllocationManifest| m.spec.mac == spec.mac && !is_claim(m, manifest);
        let found = self.find_allocations(ns, Some(&spec.pool), &OwnerFilter::default())?;
        let mut torn = Vec::new();
        for f in found {
            match f.parsed {
                Ok(m) if holds(&m) => return Ok(Some(m)),
                Ok(_) => {}
                Err(_) => torn.push(f.name),
            }
        }
        let Some(dir) = self.dir(crate::store::ObjectKind::Allocation, ns, false)? else {
            return Ok(None);
        };
        for name in torn {
            if let Some(read) = self.read_whole(&dir, ns, &format!("{name}.yaml"))?
                && let Ok(m) = read.parsed
                && holds(&m)
            {
                return Ok(Some(m));
            }
        }
        Ok(None)
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
