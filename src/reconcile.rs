//! Leak detection: which allocations belong to owners that no longer exist. Pure: the
//! caller reads the live list and the allocations.

use std::collections::HashSet;

use crate::model::{AllocationManifest, Owner, OwnerKind, Uid};

/// The owners that still exist, as the orchestrator reported them.
#[derive(Debug, Default)]
pub struct LiveSet {
    kind_names: HashSet<(OwnerKind, String)>,
    uids: HashSet<Uid>,
}

impl LiveSet {
    /// Parses one owner per line, `KIND/NAME` or a bare uid; blank lines and `#` comments
    /// are skipped. The error names the line.
    pub fn parse(text: &str) -> Result<LiveSet, String> {
        let mut live = LiveSet::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let at = |e: String| format!("line {}: {e}", i + 1);
            if line.contains('/') {
                let owner = Owner::parse(line, None).map_err(at)?;
                live.kind_names
                    .insert((owner.kind(), owner.name().to_owned()));
            } else {
                live.uids.insert(Uid::new(line).map_err(at)?);
            }
        }
        Ok(live)
    }

    /// No owner listed at all.
    pub fn is_empty(&self) -> bool {
        self.kind_names.is_empty() && self.uids.is_empty()
    }

    /// Is `owner` alive: listed by uid, or by kind and name?
    pub fn contains(&self, owner: &Owner) -> bool {
        owner.uid().is_some_and(|u| self.uids.contains(u))
            || self
                .kind_names
                .contains(&(owner.kind(), owner.name().to_owned()))
    }
}

/// The allocations (of owners of `kind`, if given) whose owner is not live.
pub fn leaks<'a>(
    allocations: &'a [AllocationManifest],
    live: &LiveSet,
    kind: Option<OwnerKind>,
) -> Vec<&'a AllocationManifest> {
    allocations
        .iter()
        .filter(|m| kind.is_none_or(|k| m.spec.owner.kind() == k))
        .filter(|m| !live.contains(&m.spec.owner))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_lines_are_owners_or_uids() {
        let live =
            LiveSet::parse("# inventory\nVirtualMachine/web-01/0\n\n0f8fad5b-d9cb\n").unwrap();
        let vm = Owner::parse("VirtualMachine/web-01/0", None).unwrap();
        let by_uid =
            Owner::parse("FloatingIP/fip", Some(Uid::new("0f8fad5b-d9cb").unwrap())).unwrap();
        let dead = Owner::parse("FloatingIP/fip", None).unwrap();
        assert!(live.contains(&vm) && live.contains(&by_uid) && !live.contains(&dead));
        assert!(LiveSet::parse("Pod/x").unwrap_err().starts_with("line 1:"));
    }
}
