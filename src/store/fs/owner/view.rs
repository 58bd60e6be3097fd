//! A batch's view of a pool's owners: which owner each allocation file names, for every
//! file no event has named since the batch last looked at it, so that an owner look-up
//! after the first in a pool reads only the files that changed, and the owner's own.
//!
//! # Why the view is as true as a scan
//!
//! A scan ([`super::scan`]) rules a file out when its status equals its index record; in a
//! batch, the status is remembered from the last real `stat` while no inotify event has
//! named the file since (`watch.rs`). The view goes one step further on the same ground: it
//! remembers the owner that ruled-out file's record names (or that the file named when it
//! was read whole and settled), and forgets it on the same events. A file no event named
//! since is the file that was looked at, so its owner is the one remembered.
//!
//! - The first look-up in a pool is a whole scan; what it learnt of every file seeds the
//!   view: the owner of each file it ruled out or read settled, and "unknown" for the rest
//!   (a file in flight, one that does not parse).
//! - Every event that names a file of the pool (`drain` in `watch.rs`) forgets its owner
//!   and makes it unknown; an overflow of the queue drops the view.
//! - A look-up then reads the unknown files and the files the view gives the owner, as a
//!   scan reads the files it cannot rule out: a file it reads settled and whole becomes
//!   known; one in flight is a hit, read again whole by the caller, and stays unknown.
//! - What is learnt is kept only if no read of the queue ran since the look-up began (the
//!   generation, as for a remembered status): an event that raced the read is never lost.
//! - The claim's re-check after its create (`claims.rs`) reads the files that changed since
//!   its look-up: in a batch, the unknown ones.
//!
//! The look-up and the re-check that use it: `view_scan.rs`.
//!
//! What the view does not see is what the watch does not (`watch.rs`): a file changed with
//! no event on its directory.
//!
//! Every race of the owner look-up, and where it is closed: [`crate::store::fs::owner`].

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;

use crate::store::fs::owner::index::name_text;

/// The owners of one pool's allocation files, as far as the batch knows them (owners as
/// [`crate::store::fs::owner::index::owner_text`]).
#[derive(Debug, Default)]
pub(in crate::store::fs) struct View {
    /// The owner each known file names.
    owner_of: HashMap<IpAddr, Box<str>>,
    /// The known files by owner's name ([`name_text`]: an owner and its namesakes share
    /// one entry; almost always one file: a vector, not a tree, a few bytes instead of a
    /// node of a few hundred for each of a pool's tens of thousands of owners).
    owners: HashMap<Box<str>, Vec<IpAddr>>,
    /// Files whose owner is not known: named by an event since they were looked at, or
    /// never settled when they were.
    unknown: BTreeSet<IpAddr>,
}

impl View {
    /// A view of the files of a scan: each address with its owner, or `None` if unknown.
    pub(in crate::store::fs) fn seeded(files: Vec<(IpAddr, Option<Box<str>>)>) -> View {
        let mut view = View::default();
        for (address, owner) in files {
            match owner {
                Some(owner) => view.know(address, owner),
                None => {
                    view.unknown.insert(address);
                }
            }
        }
        view
    }

    /// An event named the file at `address`: its owner is unknown until it is read again.
    pub(in crate::store::fs) fn forget(&mut self, address: IpAddr) {
        self.unlearn(address);
        self.unknown.insert(address);
    }

    /// The file at `address` names `owner`.
    fn know(&mut self, address: IpAddr, owner: Box<str>) {
        self.unlearn(address);
        self.unknown.remove(&address);
        self.owners
            .entry(name_text(&owner).into())
            .or_default()
            .push(address);
        self.owner_of.insert(address, owner);
    }

    /// The file at `address` is gone.
    fn gone(&mut self, address: IpAddr) {
        self.unlearn(address);
        self.unknown.remove(&address);
    }

    fn unlearn(&mut self, address: IpAddr) {
        if let Some(owner) = self.owner_of.remove(&address)
            && let Some(addresses) = self.owners.get_mut(name_text(&owner))
        {
            addresses.retain(|&a| a != address);
            if addresses.is_empty() {
                self.owners.remove(name_text(&owner));
            }
        }
    }

    /// The files a look-up for an owner whose [`name_text`] is `name` reads: the unknown
    /// ones, the owner's and its namesakes'.
    pub(in crate::store::fs) fn to_read(&self, name: &str) -> Vec<IpAddr> {
        let mut files: Vec<IpAddr> = self.unknown.iter().copied().collect();
        files.extend(self.owners.get(name).into_iter().flatten().copied());
        files
    }

    /// The files whose owner is not known.
    pub(in crate::store::fs) fn unknown(&self) -> Vec<IpAddr> {
        self.unknown.iter().copied().collect()
    }

    /// Keeps what a look-up learnt: each file's owner, or `None` for a file gone.
    pub(in crate::store::fs) fn learn(&mut self, learnt: Vec<(IpAddr, Option<Box<str>>)>) {
        for (address, owner) in learnt {
            match owner {
                Some(owner) => self.know(address, owner),
                None => self.gone(address),
            }
        }
    }
}
