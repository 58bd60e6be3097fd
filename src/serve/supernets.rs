//! Supernets and prefix claims as the queries answer them: a supernet pool's prefixes
//! (`pool list`'s and `pool show`'s figures of one, [`crate::engine::supernet`]) and the
//! prefix claims `list` shows beside the allocations, each with its manifest as stored and,
//! for a VPC's range, its VPC ([`crate::engine::range_holder`]). A supernet is read only
//! once its pool passed the caller's scope ([`super::objects`]); `prefixClaims`
//! ([`super::prefix_claims`]) covers the scopes `allocations` covers.

use std::borrow::Cow;

use async_graphql::SimpleObject;

use crate::engine::range_holder::Holder;
use crate::engine::scope::Scope;
use crate::error::Result;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::vpc::{RANGE_ANNOTATION, range_annotation_vpc};
use crate::model::{PoolKind, PoolManifest, PoolRef};
use crate::store::Store;

/// A supernet's free space: its claimed prefixes, the largest free block, and how many free
/// blocks of each handed-out length are left.
#[derive(SimpleObject, Debug)]
pub struct Supernet {
    /// Claimed prefixes, lowest first.
    pub claimed: Vec<String>,
    /// The largest free block; null when the pool is full.
    pub largest_free: Option<String>,
    /// Free blocks of each handed-out length, shortest length first.
    pub free_blocks: Vec<FreeBlock>,
}

/// How many free blocks of one length a supernet has left.
#[derive(SimpleObject, Debug)]
pub struct FreeBlock {
    pub length: i32,
    /// A decimal string (an IPv6 supernet's exceed 64 bits).
    pub count: String,
}

impl From<&crate::engine::prefix::Usage> for Supernet {
    fn from(u: &crate::engine::prefix::Usage) -> Supernet {
        Supernet {
            claimed: u.claimed.iter().map(ToString::to_string).collect(),
            largest_free: u.largest.map(|b| b.to_string()),
            free_blocks: u
                .free
                .iter()
                .map(|(length, n)| FreeBlock {
                    length: i32::from(*length),
                    count: n.to_string(),
                })
                .collect(),
        }
    }
}

/// A child prefix held by an owner (an `IPPrefixClaim`).
#[derive(SimpleObject, Debug)]
pub struct PrefixClaim {
    pub name: String,
    pub namespace: Option<String>,
    pub pool: String,
    pub prefix: String,
    pub owner: String,
    pub uid: Option<String>,
    /// The `IPPrefixClaim` document, as the store keeps it.
    pub manifest: String,
    /// The VPC (`NAMESPACE/NAME`) whose range it is, as `list` and `pool show` show it;
    /// null for a VPC in a namespace the caller does not see.
    pub vpc: Option<String>,
}

impl PrefixClaim {
    /// `m` held by `holder`, for the caller of `scope`: a VPC outside its scope goes
    /// unnamed (the claim's owner, as stored, is all it shows), so the holder's look-up
    /// across every namespace is no oracle of another tenant's VPCs.
    pub(super) fn new(m: &PrefixClaimManifest, holder: &Holder, scope: &Scope) -> PrefixClaim {
        PrefixClaim {
            name: m.metadata.name.clone(),
            namespace: m.metadata.namespace.as_ref().map(ToString::to_string),
            pool: m.spec.pool.to_string(),
            prefix: m.spec.prefix.to_string(),
            owner: m.spec.owner.to_string(),
            uid: m.spec.owner.uid().map(ToString::to_string),
            manifest: crate::yaml::encode(&seen_by(m, scope)),
            vpc: holder
                .vpc
                .as_ref()
                .filter(|v| scope.sees(Some(&v.namespace)))
                .map(|v| format!("{}/{}", v.namespace, v.name)),
        }
    }
}

/// `m` as the caller of `scope` reads it: the annotation that names the VPC whose range it
/// is ([`RANGE_ANNOTATION`]) left out unless the caller sees that VPC's namespace, as
/// [`PrefixClaim::vpc`] is (an annotation that names no VPC is left out too: it could
/// only name another's).
fn seen_by<'a>(m: &'a PrefixClaimManifest, scope: &Scope) -> Cow<'a, PrefixClaimManifest> {
    let Some(annotation) = m.metadata.annotations.get(RANGE_ANNOTATION) else {
        return Cow::Borrowed(m);
    };
    match range_annotation_vpc(annotation) {
        Some((ns, _)) if scope.sees(Some(&ns)) => Cow::Borrowed(m),
        _ => {
            let mut shown = m.clone();
            shown.metadata.annotations.remove(RANGE_ANNOTATION);
            Cow::Owned(shown)
        }
    }
}

/// `pool show`'s figures and claims of the pool `pool`, which the caller of `scope` was let
/// read (`manifest`): a supernet's, none for an address pool.
pub(super) fn shown(
    store: &dyn Store,
    scope: &Scope,
    pool: &PoolRef,
    manifest: &PoolManifest,
) -> Result<(Option<Supernet>, Vec<PrefixClaim>)> {
    if manifest.spec.kind != PoolKind::Supernet {
        return Ok((None, Vec::new()));
    }
    let (usage, held) = crate::engine::supernet::show(store, pool, manifest)?;
    let claims = held
        .iter()
        .map(|(c, h)| PrefixClaim::new(c, h, scope))
        .collect();
    Ok((Some(Supernet::from(&usage)), claims))
}
