//! JSON Schemas (draft-07, which every editor's YAML support reads) of the manifests,
//! derived from the model types with schemars, so they describe what the files contain:
//! the strings the validated newtypes accept, as patterns and formats, and no unknown field
//! anywhere. Checks across fields (a gateway inside the cidr, an allocation name that
//! matches its address) stay with `ipamctl check`.
//!
//! The model's serde is custom (strings parsed by `try_from`, `with` modules for addresses),
//! so the string types have their schemas written by hand ([`fields`]); `tests/schema.rs` validates
//! every fixture manifest against them and keeps `schema/*.json` current.

pub mod fields;

use schemars::SchemaGenerator;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

use crate::model::allocation::AllocationManifest;
use crate::model::cooldown::CooldownRecord;
use crate::model::kind::{
    ALLOCATION_KIND, COOLDOWN_KIND, ObjectKind, POOL_KIND, PREFIX_CLAIM_KIND, SUBNET_KIND,
};
use crate::model::pool::PoolManifest;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::SubnetManifest;

/// The schema of one manifest kind, as `ipamctl schema <kind>` prints it.
pub fn of(kind: ObjectKind) -> Value {
    let (schema, title, description) = match kind {
        ObjectKind::Subnet => (
            generator().into_root_schema_for::<SubnetManifest>(),
            SUBNET_KIND,
            "A named range of a pool, with its gateway and reserved addresses.",
        ),
        ObjectKind::Cooldown => (
            generator().into_root_schema_for::<CooldownRecord>(),
            COOLDOWN_KIND,
            "An address released recently from a pool with `reuseAfter`, written only by `ipamctl release`.",
        ),
        ObjectKind::Pool => (
            generator().into_root_schema_for::<PoolManifest>(),
            POOL_KIND,
            "An IPv4 address pool managed by ipamctl.",
        ),
        ObjectKind::PrefixClaim => (
            generator().into_root_schema_for::<PrefixClaimManifest>(),
            PREFIX_CLAIM_KIND,
            "A child prefix of a supernet pool held by one owner, written only by `ipamctl allocate --prefix-length`.",
        ),
        ObjectKind::Quota => (
            generator().into_root_schema_for::<crate::model::quota::QuotaManifest>(),
            crate::model::kind::QUOTA_KIND,
            "A namespace's ceilings on the addresses, floating IPs and prefixes it holds, applied with `ipamctl apply`.",
        ),
        ObjectKind::Allocation => (
            generator().into_root_schema_for::<AllocationManifest>(),
            ALLOCATION_KIND,
            "An IPv4 address held by one owner, written only by `ipamctl allocate`.",
        ),
    };
    let mut value = schema.to_value();
    let object = value
        .as_object_mut()
        .expect("a root schema is a JSON object");
    object.insert("title".into(), title.into());
    object.insert("description".into(), description.into());
    value
}

/// Every schema, keyed by manifest kind: what `ipamctl schema` prints without an argument.
pub fn all() -> Value {
    json!({
        POOL_KIND: of(ObjectKind::Pool),
        ALLOCATION_KIND: of(ObjectKind::Allocation),
        SUBNET_KIND: of(ObjectKind::Subnet),
        COOLDOWN_KIND: of(ObjectKind::Cooldown),
        PREFIX_CLAIM_KIND: of(ObjectKind::PrefixClaim),
        crate::model::kind::QUOTA_KIND: of(ObjectKind::Quota),
    })
}

fn generator() -> SchemaGenerator {
    SchemaSettings::draft07().for_deserialize().into_generator()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_schemas_are_keyed_by_kind() {
        let all = all();
        assert_eq!(all["IPAMPool"]["title"], "IPAMPool");
        assert_eq!(all["IPAllocation"]["title"], "IPAllocation");
    }

    #[test]
    fn manifests_refuse_unknown_fields() {
        let pool = of(ObjectKind::Pool);
        assert_eq!(pool["additionalProperties"], false);
    }
}
