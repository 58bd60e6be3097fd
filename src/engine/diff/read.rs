//! Reading a diff's sides: manifests from commits (through git) and from the working tree
//! (through the store), each parsed into what it reads as.

use crate::engine::git::Repo;
use crate::error::Result;
use crate::model::cooldown::CooldownRecord;
use crate::model::layout::{self, ScopeDir, locate, object_path as path_of};
use crate::model::prefix_claim::PrefixClaimManifest;
use crate::model::subnet::SubnetManifest;
use crate::model::{AllocationManifest, Namespace, PoolManifest};
use crate::store::{ObjectKind, Store};
use crate::yaml;

/// A tree to read manifests from.
#[derive(Clone, Copy)]
pub(super) enum Tree<'a> {
    Commit(&'a str),
    Worktree,
}

/// Reads manifests from commits (through git) and from the working tree (through the
/// store, beneath the state directory's handle).
pub(super) struct Reader<'a> {
    pub(super) repo: &'a Repo,
    pub(super) store: &'a dyn Store,
}

impl Reader<'_> {
    /// The bytes of each path in `tree`.
    pub(super) fn read(&self, tree: Tree<'_>, paths: &[&str]) -> Result<Vec<Option<Vec<u8>>>> {
        match tree {
            Tree::Commit(rev) => {
                let wanted: Vec<(String, String)> = paths
                    .iter()
                    .map(|p| (rev.to_owned(), (*p).to_owned()))
                    .collect();
                self.repo.blobs(&wanted)
            }
            Tree::Worktree => paths
                .iter()
                .map(|p| match locate(p) {
                    Some((kind, ns, name)) => self.store.get(kind, ns.as_ref(), &name),
                    None => Ok(None),
                })
                .collect(),
        }
    }

    /// The names of the objects of `kind` in scope `ns` of `tree`.
    pub(super) fn names(
        &self,
        tree: Tree<'_>,
        kind: ObjectKind,
        ns: Option<&Namespace>,
    ) -> Result<Vec<String>> {
        match tree {
            Tree::Commit(rev) => {
                let dir = layout::dir_path(ScopeDir::Objects(kind), ns);
                Ok(self
                    .repo
                    .list(rev, &dir)?
                    .into_iter()
                    .filter_map(|f| f.strip_suffix(".yaml").map(str::to_owned))
                    .collect())
            }
            Tree::Worktree => self.store.list(kind, ns),
        }
    }

    /// The subnets of `pool` in scope `ns` of `tree` that parse.
    pub(super) fn subnets(
        &self,
        tree: Tree<'_>,
        ns: Option<&Namespace>,
        pool: &str,
    ) -> Result<Vec<SubnetManifest>> {
        let paths: Vec<String> = self
            .names(tree, ObjectKind::Subnet, ns)?
            .iter()
            .map(|n| path_of(ObjectKind::Subnet, ns, n))
            .collect();
        let paths: Vec<&str> = paths.iter().map(String::as_str).collect();
        Ok(self
            .read(tree, &paths)?
            .into_iter()
            .flatten()
            .filter_map(|b| match parse(ObjectKind::Subnet, &b) {
                Read::Subnet(m) if m.spec.pool.as_str() == pool => Some(*m),
                _ => None,
            })
            .collect())
    }
}

/// An object as read from one side.
pub(super) enum Read {
    Allocation(Box<AllocationManifest>),
    Pool(Box<PoolManifest>),
    Subnet(Box<SubnetManifest>),
    Cooldown(Box<CooldownRecord>),
    PrefixClaim(Box<PrefixClaimManifest>),
    Quota(Box<crate::model::quota::QuotaManifest>),
    Broken(String),
}

pub(super) fn parse(kind: ObjectKind, bytes: &[u8]) -> Read {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return Read::Broken("not UTF-8".into());
    };
    match kind {
        ObjectKind::Allocation => match yaml::decode_allocation(text) {
            Ok(m) => Read::Allocation(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Pool => match yaml::decode_pool(text) {
            Ok(m) => Read::Pool(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Subnet => match yaml::decode_subnet(text) {
            Ok(m) => Read::Subnet(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Cooldown => match yaml::decode_cooldown(text) {
            Ok(m) => Read::Cooldown(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::PrefixClaim => match yaml::decode_prefix_claim(text) {
            Ok(m) => Read::PrefixClaim(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
        ObjectKind::Quota => match yaml::decode_quota(text) {
            Ok(m) => Read::Quota(Box::new(m)),
            Err(e) => Read::Broken(e),
        },
    }
}
