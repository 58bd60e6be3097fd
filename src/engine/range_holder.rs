//! Who holds a range, by name: a prefix claim owned by `VPC/router` with a VPC's uid is that
//! VPC's range, shown as the VPC (`tenant-1/prod/a1`: its namespace and name), with its uid;
//! any other owner is shown as itself (`FloatingIP/fip-1`). The name comes from the claim's
//! annotation ([`RANGE_ANNOTATION`]) and is believed only once a pool of that namespace
//! carries the same uid in its `ownerRefs`, as a VPC's pools do: an annotation is text any
//! hand can write, the owner reference is the identity.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::error::Result;
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::vpc::{RANGE_ANNOTATION, owning_vpc, range_annotation_vpc, vpc_uid};
use crate::model::{Namespace, Owner, OwnerKind, PoolName, Uid};
use crate::store::read::load_pool;
use crate::store::{ObjectKind, Store};

/// A VPC, as the holder of a range names it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VpcHolder {
    /// Its tenant namespace.
    pub namespace: Namespace,
    /// Its name.
    pub name: String,
    /// Its uid: the owner reference of its pools and the uid of its router's claims.
    pub uid: Uid,
}

/// Who holds a claim: the VPC whose range it is, if it is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The claim's owner as stored (`VPC/router`, `FloatingIP/fip-1`).
    pub owner: Owner,
    /// The VPC it belongs to, found by its uid.
    pub vpc: Option<VpcHolder>,
}

impl Holder {
    /// The holder as a person reads it: `VPC tenant-1/prod/a1` for a VPC's range, else the
    /// owner (`FloatingIP/fip-1`).
    pub fn display(&self) -> String {
        match &self.vpc {
            Some(v) => format!("VPC {}/{}", v.namespace, v.name),
            None => self.owner.to_string(),
        }
    }

    /// [`Holder::display`] with the owner's uid after it, if it has one (`VPC
    /// tenant-1/prod/a1 (uid …)`, `FloatingIP/fip-1 (uid …)`), as a tooltip names a holder.
    pub fn display_with_uid(&self) -> String {
        match self.owner.uid() {
            Some(uid) => format!("{} (uid {uid})", self.display()),
            None => self.display(),
        }
    }
}

/// Resolves the holders of claims, remembering each VPC uid it has looked up.
pub struct Holders<'a> {
    store: &'a dyn Store,
    /// The VPC of each uid looked up (`None`: no VPC pool carries it).
    known: BTreeMap<Uid, Option<VpcHolder>>,
}

impl<'a> Holders<'a> {
    /// A resolver reading `store`.
    pub fn new(store: &'a dyn Store) -> Holders<'a> {
        Holders {
            store,
            known: BTreeMap::new(),
        }
    }

    /// The holder of `claim`: for a claim of a VPC router, the VPC whose pools carry its
    /// uid (in the namespace its annotation names, else in any scope); else its owner.
    pub fn of(&mut self, claim: &PrefixClaimManifest) -> Result<Holder> {
        self.of_owner(&claim.spec.owner, Some(claim))
    }

    /// The holder of whatever `owner` holds (an address: a VPC router's uplink), found as
    /// [`Holders::of`] finds a claim's, the annotation of `claim` (if any) naming where to
    /// look first.
    pub fn of_owner(
        &mut self,
        owner: &Owner,
        claim: Option<&PrefixClaimManifest>,
    ) -> Result<Holder> {
        let owner = owner.clone();
        let vpc = match (owner.kind(), owner.uid()) {
            (OwnerKind::Vpc, Some(uid)) => {
                let hint = claim
                    .and_then(|c| c.metadata.annotations.get(RANGE_ANNOTATION))
                    .and_then(|a| range_annotation_vpc(a))
                    .map(|(ns, name)| (ns, name.to_owned()));
                self.vpc(uid, hint)?
            }
            _ => None,
        };
        Ok(Holder { owner, vpc })
    }

    /// How a view shows an owner carried as text (`KIND/NAME` and its uid, as `diff` and
    /// `history` carry it): a VPC router whose uid a VPC's pools carry now reads as that VPC
    /// (`VPC tenant-1/prod/a1`); any other owner, or one no VPC's pools carry any more, as
    /// given.
    pub fn display_text(&mut self, owner: &str, uid: Option<&str>) -> Result<String> {
        let parsed = uid
            .filter(|_| owner.starts_with("VPC/"))
            .and_then(|u| Uid::new(u).ok())
            .and_then(|u| Owner::parse(owner, Some(u)).ok());
        Ok(match parsed {
            Some(o) => self.of_owner(&o, None)?.display(),
            None => owner.to_owned(),
        })
    }

    /// The VPC of `uid`, looked up once: in the namespace `hint` names first (its name
    /// taken from the hint), then in every scope (named after its pool).
    fn vpc(&mut self, uid: &Uid, hint: Option<(Namespace, String)>) -> Result<Option<VpcHolder>> {
        if let Some(known) = self.known.get(uid) {
            return Ok(known.clone());
        }
        let mut found = None;
        if let Some((ns, name)) = hint
            && self.pool_of(uid, &ns)?.is_some()
        {
            found = Some(VpcHolder {
                namespace: ns,
                name,
                uid: uid.clone(),
            });
        }
        if found.is_none() {
            for scope in self.store.scopes()? {
                let Some(ns) = scope else { continue };
                if let Some(name) = self.pool_of(uid, &ns)? {
                    found = Some(VpcHolder {
                        namespace: ns,
                        name,
                        uid: uid.clone(),
                    });
                    break;
                }
            }
        }
        self.known.insert(uid.clone(), found.clone());
        Ok(found)
    }

    /// The name of the VPC whose pool in `ns` carries `uid` in its `ownerRefs`, if one
    /// does. A pool that cannot be read is passed over: `check` reports it.
    fn pool_of(&self, uid: &Uid, ns: &Namespace) -> Result<Option<String>> {
        for name in self.store.list(ObjectKind::Pool, Some(ns))? {
            let Ok(pool_name) = PoolName::new(&name) else {
                continue;
            };
            let pool = crate::model::PoolRef {
                namespace: Some(ns.clone()),
                name: pool_name.clone(),
            };
            if let Ok(m) = load_pool(self.store, &pool)
                && vpc_uid(&m).as_ref() == Some(uid)
            {
                let vpc = owning_vpc(&pool_name, &m).unwrap_or(&name).to_owned();
                return Ok(Some(vpc));
            }
        }
        Ok(None)
    }
}
