//! A tenant's floating IP: a floating IP claimed from a cluster-scoped public pool for one
//! namespace (the tenant), whose owner name carries the tenant, `FloatingIP/<tenant>/<name>`
//! (e.g. `FloatingIP/acme/prod/fip-web`), and whose allocation carries the label
//! [`TENANT_LABEL`].
//!
//! Why the tenant is in the name: an owner's name is one identity per pool
//! ([`crate::engine::identity`]; the file store's owner lock is the name's, PostgreSQL's
//! unique index is on the name), so two tenants who both name a floating IP `fip-web` would
//! otherwise be one owner: the second would be answered the first one's address, or refused
//! because of it. Qualified, they are two names, and every arbiter already tells them apart
//! with no new lock, index or migration. The split is unique: a tenant is a namespace
//! (labels joined by `/`) and a floating IP's own name a label (no `/`), so the last `/`
//! separates them, and an unqualified name (no `/`) is never a tenant's.
//!
//! Why a label too: so that `-l pivirt.hu/tenant=acme.prod` selects a tenant's floating IPs
//! like any label, and a reader of the manifest sees the tenant as metadata. A label value
//! cannot hold `/`, so it is the namespace with `/` written `.` (injective: a namespace's
//! segments are RFC 1123 labels, without `.`), and so at most 63 characters: a tenant whose
//! namespace is longer is refused when it claims. The label is derived from the owner when
//! the manifest is made ([`crate::model::AllocationManifest::new`]), so every writer writes
//! it alike; `check` reports a hand edit that makes the two disagree
//! ([`crate::model::AllocationManifest::tenant_problem`]).
//!
//! [`crate::model::Owner::floating`] makes a tenant's owner, [`crate::model::Owner::tenant`]
//! reads it back.

use crate::model::names::{Namespace, check_label};

/// The label that records a tenant's floating IP's namespace (as [`label_value`] spells it).
pub const TENANT_LABEL: &str = "pivirt.hu/tenant";

/// The value of [`TENANT_LABEL`] for `tenant`: its `/` written `.` (`acme/prod` →
/// `acme.prod`); `None` when that is longer than a label value may be (63 characters).
pub fn label_value(tenant: &Namespace) -> Option<String> {
    let value = tenant.as_str().replace('/', ".");
    (value.len() <= 63).then_some(value)
}

/// Checks a floating IP's name: a label, or `<tenant>/<label>` with a tenant that a label
/// can record.
pub(crate) fn check_floating_name(name: &str) -> Result<(), String> {
    let Some((tenant, own)) = name.rsplit_once('/') else {
        return check_label(name);
    };
    let tenant = Namespace::new(tenant).map_err(|why| format!("its tenant: {why}"))?;
    if label_value(&tenant).is_none() {
        return Err(format!(
            "its tenant `{tenant}` is longer than the 63 characters its label `{TENANT_LABEL}` can record"
        ));
    }
    check_label(own).map_err(|why| format!("`{}` {why}", own.escape_debug()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AllocationManifest, Owner, PoolName};

    fn ns(s: &str) -> Namespace {
        Namespace::new(s).unwrap()
    }

    #[test]
    fn two_tenants_name_two_owners_and_the_split_is_unique() {
        let a = Owner::floating(&ns("acme"), "fip-web", None).unwrap();
        let b = Owner::floating(&ns("beta"), "fip-web", None).unwrap();
        assert_ne!(a, b);
        assert!(!a.is_namesake(&b), "two tenants' names are not namesakes");
        assert_ne!(a.lock_key(), b.lock_key());
        let deep = Owner::floating(&ns("acme/prod"), "fip-web", None).unwrap();
        assert_eq!(deep.tenant(), Some(ns("acme/prod")));
        assert_eq!(
            Owner::parse("FloatingIP/fip-web", None).unwrap().tenant(),
            None
        );
        assert_eq!(
            Owner::parse("FloatingIP/acme/prod/fip-web", None).unwrap(),
            deep
        );
        assert!(Owner::parse("FloatingIP/acme/", None).is_err());
        assert!(Owner::parse("FloatingIP/Acme/x", None).is_err());
        let long = ns(&["abcdefghij"; 7].join("/"));
        assert!(Owner::floating(&long, "x", None).is_err());
    }

    #[test]
    fn the_label_is_derived_and_a_disagreement_is_found() {
        let pool = PoolName::new("public-eu").unwrap();
        let owner = Owner::floating(&ns("acme/prod"), "fip-web", None).unwrap();
        let mut m = AllocationManifest::new(&pool, None, "192.0.2.9".parse().unwrap(), owner);
        assert_eq!(
            m.metadata.labels.get(TENANT_LABEL).map(String::as_str),
            Some("acme.prod")
        );
        assert_eq!(m.tenant_problem(), None);
        m.metadata.labels.insert(TENANT_LABEL.into(), "beta".into());
        assert!(
            m.tenant_problem()
                .unwrap()
                .contains("is `beta`, not `acme.prod`")
        );
        m.metadata.labels.remove(TENANT_LABEL);
        assert!(m.tenant_problem().unwrap().contains("is missing"));
        let plain = Owner::parse("FloatingIP/fip-web", None).unwrap();
        let mut m = AllocationManifest::new(&pool, None, "192.0.2.9".parse().unwrap(), plain);
        assert_eq!(m.tenant_problem(), None);
        m.metadata.labels.insert(TENANT_LABEL.into(), "acme".into());
        assert!(m.tenant_problem().unwrap().contains("names no tenant"));
    }
}
