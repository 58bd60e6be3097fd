//! A namespace's quota (`Quota`): ceilings on what a namespace holds, as Neutron's
//! `quota_floatingip` or a Kubernetes `ResourceQuota` does, so that one tenant cannot drain
//! a pool shared with others.
//!
//! Three resources, each counted as [`Resource`] says: `addresses` (allocations in the
//! namespace's own pools; a dual-stack claim is one address per family, so two),
//! `floatingIPs` (the tenant's floating IPs in the cluster's public pools, owner
//! `FloatingIP/<tenant>/<name>`) and `prefixes` (prefix claims in the namespace's own
//! supernet pools, and its VPCs' ranges drawn from cluster supernets). A namespace may hold
//! several quotas; each is kept, so the lowest limit of a resource is the one that bites.
//!
//! Who keeps it, and how it is race-free, is [`crate::engine::quota`]'s business; this file
//! holds the value and its validation.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::kind::{API_VERSION, QUOTA_KIND};
use crate::model::manifest::Metadata;
use crate::model::names::{Namespace, check_label};

/// What a quota limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Resource {
    /// Allocations in the namespace's pools (one per address, so one per family).
    Addresses,
    /// The tenant's floating IPs in the cluster's public pools.
    FloatingIps,
    /// Prefix claims in the namespace's supernets and its VPCs' ranges.
    Prefixes,
}

impl Resource {
    /// Every resource, in the order views list them.
    pub const ALL: [Resource; 3] = [
        Resource::Addresses,
        Resource::FloatingIps,
        Resource::Prefixes,
    ];

    /// The field of `spec.hard` that limits it, as messages and metrics spell it.
    pub const fn name(self) -> &'static str {
        match self {
            Resource::Addresses => "addresses",
            Resource::FloatingIps => "floatingIPs",
            Resource::Prefixes => "prefixes",
        }
    }
}

impl std::fmt::Display for Resource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `spec.hard`: the ceilings, each optional (an absent one is no limit).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Hard {
    /// Allocations in the namespace's pools; a dual-stack claim counts one per family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<u64>,
    /// The tenant's floating IPs in the cluster's public pools.
    #[serde(
        default,
        rename = "floatingIPs",
        skip_serializing_if = "Option::is_none"
    )]
    pub floating_ips: Option<u64>,
    /// Prefix claims in the namespace's supernet pools, and its VPCs' ranges.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefixes: Option<u64>,
}

/// `spec` of a quota.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QuotaSpec {
    /// The ceilings.
    pub hard: Hard,
}

/// A `Quota` manifest: namespaced, written by `apply`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct QuotaManifest {
    /// Always [`API_VERSION`].
    #[schemars(
        schema_with = "crate::model::schema::fields::api_version",
        description = "Always `pivirt.hu/v1`."
    )]
    pub api_version: String,
    /// Always [`QUOTA_KIND`].
    #[schemars(
        schema_with = "crate::model::schema::fields::quota_kind",
        description = "Always `Quota`."
    )]
    pub kind: String,
    /// Its name and namespace (required: a quota is a namespace's).
    pub metadata: Metadata,
    /// The ceilings.
    pub spec: QuotaSpec,
}

impl QuotaManifest {
    /// A quota named `name` of `ns` with `hard`.
    pub fn new(name: &str, ns: &Namespace, hard: Hard) -> QuotaManifest {
        QuotaManifest {
            api_version: API_VERSION.into(),
            kind: QUOTA_KIND.into(),
            metadata: Metadata {
                name: name.to_owned(),
                namespace: Some(ns.clone()),
                labels: Default::default(),
                annotations: Default::default(),
                owner_refs: Vec::new(),
                creation_timestamp: None,
                deletion_timestamp: None,
            },
            spec: QuotaSpec { hard },
        }
    }

    /// Checks the manifest: its kind, a name that is a label, a namespace, and at least one
    /// ceiling. Errors name the field.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_version != API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{API_VERSION}`",
                self.api_version
            ));
        }
        if self.kind != QUOTA_KIND {
            return Err(format!(
                "kind: expected `{QUOTA_KIND}`, found `{}`",
                self.kind
            ));
        }
        check_label(&self.metadata.name).map_err(|e| format!("metadata.name: {e}"))?;
        if self.metadata.namespace.is_none() {
            return Err(
                "metadata.namespace: missing; a quota is a namespace's (a cluster-wide one is not supported)"
                    .into(),
            );
        }
        if Resource::ALL.iter().all(|r| self.limit(*r).is_none()) {
            return Err(
                "spec.hard: sets no ceiling; give at least one of `addresses`, `floatingIPs` and `prefixes`"
                    .into(),
            );
        }
        Ok(())
    }

    /// Its namespace (set on every quota that validated).
    pub fn namespace(&self) -> Option<&Namespace> {
        self.metadata.namespace.as_ref()
    }

    /// Its ceiling of `resource`, if it sets one.
    pub fn limit(&self, resource: Resource) -> Option<u64> {
        let hard = &self.spec.hard;
        match resource {
            Resource::Addresses => hard.addresses,
            Resource::FloatingIps => hard.floating_ips,
            Resource::Prefixes => hard.prefixes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_needs_a_namespace_and_a_ceiling() {
        let ns = Namespace::new("acme").unwrap();
        let hard = Hard {
            addresses: Some(10),
            ..Hard::default()
        };
        let q = QuotaManifest::new("compute", &ns, hard);
        assert_eq!(q.validate(), Ok(()));
        assert_eq!(q.limit(Resource::Addresses), Some(10));
        assert_eq!(q.limit(Resource::FloatingIps), None);
        let mut none = q.clone();
        none.spec.hard = Hard::default();
        assert!(none.validate().unwrap_err().starts_with("spec.hard"));
        let mut cluster = q.clone();
        cluster.metadata.namespace = None;
        assert!(
            cluster
                .validate()
                .unwrap_err()
                .starts_with("metadata.namespace")
        );
        let mut bad = q;
        bad.metadata.name = "Not_A_Label".into();
        assert!(bad.validate().unwrap_err().starts_with("metadata.name"));
    }

    #[test]
    fn the_floating_ip_ceiling_is_spelled_as_the_issue_does() {
        let text = serde_json::to_string(&Hard {
            floating_ips: Some(3),
            ..Hard::default()
        })
        .unwrap();
        assert_eq!(text, r#"{"floatingIPs":3}"#);
    }
}
