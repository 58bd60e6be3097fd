//! The names that appeared in a pool's directory while one claim ran: an inotify watch
//! added before the claim's look-up lists the directory, read by its re-check after the
//! create (`recheck.rs`) instead of a second listing.
//!
//! At 50,000 files a listing is most of a new owner's claim beside its `stat`s (issue 47:
//! the re-check's listing took the claim from under the serial `stat` floor to over it).
//! The watch costs four system calls and holds no memory per file.
//!
//! Why it sees every name the listing would: the watch is added before the look-up's
//! listing begins, and every create or rename into the directory queues its event before
//! the call that made it returns, so a name that was not in the look-up's listing and is
//! there at the re-check has an event (`IN_CREATE` or `IN_MOVED_TO`). It sees more: a name
//! removed and made again in between (`git checkout`) has an event too, where the listing,
//! which skips what the look-up saw, reads it only if its address was free before.
//!
//! A batch sets none: it has its own watch and view (`watch.rs`, `view.rs`), and its
//! look-ups that leave no claim (dry runs, refusals) would each hold an inotify instance,
//! 128 a user by default, until the next look-up of their owner.
//!
//! When it is not used, the re-check lists the directory as before: the directory is not
//! on a local file system (where another host's change raises no event: [`super::watch`]),
//! inotify is not available or out of watches, `/proc` is not mounted, or the queue
//! overflowed or could not be read.

use std::collections::BTreeSet;
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd};

use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};

use crate::model::parse_allocation_name;
use crate::store::fs::beneath;
use crate::store::fs::owner::watch::is_local;

/// A watch on one directory for names made in it.
#[derive(Debug)]
pub(in crate::store::fs) struct Appeared {
    inotify: OwnedFd,
}

impl Appeared {
    /// Watches `dir` for names made in it from now on; `None` when it cannot (see the
    /// module docs), and the re-check then lists the directory.
    pub(in crate::store::fs) fn watch(dir: &OwnedFd) -> Option<Appeared> {
        if !is_local(dir) {
            return None;
        }
        let inotify = inotify::init(CreateFlags::CLOEXEC | CreateFlags::NONBLOCK).ok()?;
        // The handle's own directory, whatever has become of its path since it was opened.
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let mask = WatchFlags::CREATE | WatchFlags::MOVED_TO | WatchFlags::ONLYDIR;
        inotify::add_watch(&inotify, path.as_str(), mask).ok()?;
        Some(Appeared { inotify })
    }

    /// The addresses of `pool` whose files were made since [`Appeared::watch`], ascending;
    /// `None` when that cannot be known (the queue overflowed, the directory went away, a
    /// read failed), and the re-check then lists the directory.
    pub(in crate::store::fs) fn in_pool(&self, pool: &str) -> Option<BTreeSet<IpAddr>> {
        let mut addresses = BTreeSet::new();
        let mut buf = [MaybeUninit::<u8>::uninit(); 16 * 1024];
        let mut reader = inotify::Reader::new(&self.inotify, &mut buf);
        loop {
            let event = match reader.next() {
                Ok(event) => event,
                Err(rustix::io::Errno::AGAIN) => return Some(addresses),
                Err(_) => return None,
            };
            let flags = event.events();
            if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::IGNORED | ReadFlags::UNMOUNT)
            {
                return None;
            }
            let Some(name) = event.file_name().map(|n| n.to_bytes()) else {
                continue;
            };
            let parsed = name
                .strip_suffix(b".yaml")
                .and_then(beneath::utf8)
                .and_then(parse_allocation_name);
            if let Some((of, address)) = parsed
                && of == pool
            {
                addresses.insert(address);
            }
        }
    }
}
