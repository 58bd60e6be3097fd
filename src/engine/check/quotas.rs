//! `check`'s quota rule: a namespace that holds more than one of its quotas allows, which
//! no claim makes (each is counted under the namespace's quota lock, `engine::quota`) but
//! a hand edit, a merge, `git pull` or a quota lowered below what is held can. A warning:
//! the state is consistent, and claims charged to the namespace are refused until it is
//! back under.

use super::{Finding, Severity};
use crate::engine::quota;
use crate::store::{ObjectKind, Store};

/// One warning per ceiling exceeded, on the quota's file. A quota that does not parse is
/// the walk's finding, not this rule's: then nothing is added here.
pub(super) fn over_quota(store: &dyn Store) -> Vec<Finding> {
    let Ok(over) = quota::over(store) else {
        return Vec::new();
    };
    over.into_iter()
        .map(|u| Finding {
            severity: Severity::Warning,
            path: store.locate(ObjectKind::Quota, Some(&u.namespace), &u.quota),
            message: format!(
                "namespace `{}` holds {} {} but this quota allows {}: claims charged to it are refused until {} {} released (a hand edit, a merge or a lowered quota?)",
                u.namespace,
                u.used,
                u.resource,
                u.limit,
                u.used - u.limit,
                if u.used - u.limit == 1 { "is" } else { "are" }
            ),
        })
        .collect()
}
