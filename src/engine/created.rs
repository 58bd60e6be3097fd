//! The creation time of a pool or subnet, which ipamctl records itself. Of two segments whose
//! DHCP subnet ids collide ([`crate::engine::segments`]), the one created first keeps its
//! id: a segment without a recorded time counts as the oldest, so a new pool or subnet whose
//! id would move an existing one's is written with the time it was created, and sorts after
//! every existing segment. The time is never taken from an input: a manifest claiming to be
//! older would take an existing subnet's id, and the leases keyed by it.

use crate::model::Metadata;
use crate::model::Timestamp;

/// Sets `metadata.creationTimestamp` to what is stored for the object, `old` (none for a new
/// object, and for one written before its time was recorded): what the input said is
/// dropped, so an input that repeats the stored object compares equal to it (`unchanged`).
pub fn keep(metadata: &mut Metadata, old: Option<&Metadata>) {
    metadata.creation_timestamp = old.and_then(|o| o.creation_timestamp);
}

/// For a new object: records now as its creation time if, without one, it would move an
/// existing segment's id (`moves_an_id`, [`crate::engine::segments::moves_an_id`]).
/// Otherwise it is written without one, byte for byte as before ids were guarded.
pub fn record(metadata: &mut Metadata, moves_an_id: bool) {
    metadata.creation_timestamp = moves_an_id.then(Timestamp::now);
}
