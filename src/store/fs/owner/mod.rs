//! Who owns an allocation file: the owner look-up ([`crate::store::Queries::find_owner`],
//! in `queries.rs`) and every cache of its answer.
//!
//! The allocation files are the only truth. Every layer below keeps part of one fact, "which
//! owner this file names", so that a look-up need not read 50,000 files to learn it; none is
//! believed without evidence taken from the file as it is now, so a cache lost, stale,
//! copied from another clone or edited by hand costs reads, never a wrong answer.
//!
//! # The layers, in the order a look-up for owner O in pool P asks them
//!
//! | # | layer (file) | lives | answers | made untrue by | falls back to |
//! |---|---|---|---|---|---|
//! | 1 | owner hint (`hint.rs`) | `.index/<allocations dir>/<P>.owners/<key of O>`, every command | "O's allocation is at A", believed only when the file at A, read now and settled, names O at A | nothing checks it ahead: any change of the file at A (a release, a relabel, `git checkout`) fails the read's test | 2, or 3 outside a batch |
//! | 2 | batch view (`view.rs`, `view_scan.rs`) | memory of one `allocate -f`/`release -f`, after P's first whole scan in it | which files no event named since they were seen, and whose they were: only the unknown ones and O's are read | an inotify event naming the file (it becomes unknown); a queue overflow or the directory going drops the view | 3 |
//! | 3 | scan (`scan.rs`) over the owner index (`index.rs`, `index/`) | `.index/<allocations dir>/<P>.idx`, every command | "file F is owner X's" for every file whose status (inode, size, mtime, ctime, to the nanosecond) equals its record; those and O's are ruled out or rebuilt unread, the rest read | any change of the file's status; a line whose seal does not match | reading the file |
//! | – | watch (`watch.rs`) | memory of one batch, under 3 (and 2) | a directory's listing and each file's status, as of the last real `ls`/`stat`, while no event named it | an event naming the name; overflow drops it; not used off a local file system | a real listing and `stat` |
//! | – | `looked` map (`recheck.rs`) | memory of one process, after a look-up that found nothing | what that look-up saw taken, for the claim's re-check after its create: it reads only the names that appeared since: those an inotify watch set before the look-up's listing reported (`appeared.rs`), else those of a new listing the look-up did not see (in a batch, the view's unknown files instead) | taken by the claim that follows; replaced by the next look-up of the same owner | no look-up, no re-check |
//!
//! What a look-up does with them (`queries.rs`):
//! 1. *Hint.* Read O's hint, then the one file it names: if it names O at that address,
//!    settled, that is the answer, in two small reads whatever the pool's size.
//! 2. *View.* In a batch that already scanned P: the addresses taken, from the watch's
//!    listing, and as hits the files the view does not know and the ones it gives O (or a
//!    namesake of O: one name is one identity per pool).
//! 3. *Scan.* Otherwise list P (in a batch, the watch's listing), load P's index (kept by
//!    the watch in a batch), rule out each file whose status (in a batch, the remembered
//!    one) equals its record and whose owner is neither O nor a namesake, read the rest, and
//!    append what was learnt to the index. A batch's first whole scan seeds the view.
//!    Outside a batch the index is read on a second thread while P is listed, and the
//!    files' statuses are taken as soon as the listing ends, that thread joining once its
//!    index is parsed (`prestat.rs`); a look-up that finds nothing first sets a watch for
//!    its claim's re-check (`appeared.rs`).
//!
//! Then every hit that does not parse or may be in flight is read again whole
//! (`allocation.rs`), and the answer is O's file, else its namesake's, with the broken files
//! of the pool. A found answer is written as O's hint; none is kept in `looked`.
//! A supernet pool's prefix claims have steps 3 alone, keyed by prefix
//! (`prefix_claims.rs`, `kind.rs`).
//!
//! What each layer earns, measured by bypassing it (`bench/owner-layers`, `skip.rs`): the
//! hint a re-ask's scan (62× at 50,000 files), `looked` a new owner's second scan (1.5×),
//! the index reading every file (2.5× to 4.6×), the view and the watch a batch's per-request
//! walk of the pool (4.9×, 63×); `docs/src/performance.md`.
//!
//! # The races, and where each is closed
//!
//! ipamctl's own writers are kept apart by locks (a claim holds its owner's lock from its
//! look-up until its file is durable: `claims.rs`, [`super::lock`]); outside writers (git,
//! cp, rsync, editors) take none. What they can do to a look-up, and what closes it:
//! - *A hint that names the wrong file* (stale, copied, edited): the file it names is read
//!   now and must name O at that very address and be settled (`queries.rs`, step 1).
//! - *A file changed since its record*: a record vouches only while the file's status is the
//!   recorded one to the nanosecond; ctime cannot be set from user space (`index.rs`).
//! - *A stamp that repeats* (a change in the same clock tick as the read that recorded the
//!   file: "racily clean"): only files changed longer ago than the file system's timestamp
//!   granularity are recorded, [`index::RACY_NS`] before the read began, or
//!   [`index::COARSE_NS`] where whole-second stamps reveal a coarse one
//!   ([`index::Stamp::margin`], `index/stamp.rs`).
//! - *An index line edited to make one owner's file look like another's*: its seal no
//!   longer matches and it vouches for nothing (`index/seal.rs`, `index/line.rs`).
//! - *An index lost, truncated, or appended to while it is rewritten*: it only costs reads
//!   (`index.rs`, `index/file.rs`).
//! - *A file in flight*: a file rewritten in place passes through prefixes, and a prefix
//!   can parse as another owner. A file that parses is trusted only if its bytes are exactly
//!   ipamctl's output or it has not changed for 2 s (the stall window: a rewrite in two
//!   writes 1.5 s apart whose first stops inside the owner's name gave the owner a second
//!   address when this was half a second, issue 31); a file that does not parse is judged
//!   broken after half a second unchanged, an empty one after 2 s; every such hit is read
//!   again whole (`allocation.rs`). Releases apply the rule to the bytes, with half a
//!   second (`engine::release`).
//! - *O's name under another uid*: namesakes' files are hits too, so the name stays one
//!   identity per pool ([`crate::store::OwnerLookup::namesake`]).
//! - *A file that names O but is no manifest*: a claim fails closed (exit 1, naming the
//!   file) when a file of the pool that does not parse names O's uid, or its kind and name,
//!   whatever its size: a file over a manifest's 1 MiB is searched too (up to 64 MiB; a
//!   larger one may be anyone's, and fails every claim in its pool closed until it is
//!   removed) (`engine::allocate`).
//! - *O's file replaced while a claim for O runs* (`git checkout`: unlink, then create):
//!   after its create, the claim re-reads what appeared since its look-up (the names the
//!   look-up's watch reported, `appeared.rs`; without one, a listing against the `looked`
//!   map; in a batch, the view) and undoes itself if O's file came back; safe because O's
//!   lock keeps every other ipamctl claim of O out (`claims.rs`, `recheck.rs`). A
//!   replacement that straddles the whole claim is left: `check` reports the duplicate.
//! - *In a batch, a change between two requests*: the watch is added before the directory
//!   is first listed, and every change made through the directory (create, unlink, rename,
//!   write, truncate, chmod, utimes) queues an event before the call that made it returns;
//!   each look-up first reads the whole queue (`watch.rs`).
//! - *In a batch, an event that races a `stat` or a read*: what the read learnt is kept
//!   only if no queue read ran since it began (the generation: `watch.rs`, `view.rs`).
//! - *In a batch, a queue overflow or the directory removed*: the memory is dropped, and the
//!   batch goes on with real listings and `stat`s (`watch.rs`).
//! - *What inotify does not report* (a file system that is not local, a write through a
//!   second hard link from another directory or a shared `mmap`): the first is never
//!   remembered; the others are left, as the residue of a single claim is (`watch.rs`,
//!   `docs/src/guarantees.md`), and a file with a second name is refused by every read.
//!
//! What an outside writer can still do to any command: the list in [`super`].

mod appeared;
mod hint;
pub mod index;
pub(super) mod kind;
mod prefix_claims;
mod prestat;
mod queries;
mod recheck;
mod scan;
mod skip;
mod view;
mod view_scan;
pub(super) mod watch;

pub(super) use recheck::Looked;
pub(super) use skip::{Layer, check as check_skip, skipped};
