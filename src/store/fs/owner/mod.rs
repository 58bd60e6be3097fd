//! Who owns an allocation file: the owner look-up ([`crate::store::Queries::find_owner`]),
//! and every cache of its answer.

mod hint;
pub mod index;
pub(super) mod kind;
mod prefix_claims;
mod queries;
mod recheck;
mod scan;
mod view;
mod view_scan;
pub(super) mod watch;
