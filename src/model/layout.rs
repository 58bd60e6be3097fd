//! Where each object lives in a state directory: the one place the layout's directory names
//! are spelled. The file store makes its paths here, `check` walks by them, `diff` and
//! `history` read git trees by them, a database's `check` names its rows by them, and no
//! namespace segment may take one ([`crate::model::Namespace`]), so that a path names one
//! object and a directory one thing (the tests below show it for every directory).
//!
//! ```text
//! cluster/<dir>/<file>                  the cluster scope
//! namespaces/<segment>/…/<dir>/<file>   a namespace, one directory per segment
//! ```
//!
//! `<dir>` is one of [`ScopeDir::ALL`]: the `<name>.yaml` manifests of one kind of object,
//! or the file store's MAC records. A namespace whose last segment were `macs` would be
//! the directory of its parent's MAC records (issue 46): every name a scope's directory
//! takes is a segment no namespace may take.

use crate::model::{Namespace, ObjectKind};

/// The cluster scope's directory, at the root.
pub const CLUSTER: &str = "cluster";

/// The directory of the namespaces' directories, at the root.
pub const NAMESPACES: &str = "namespaces";

/// The end of a manifest's file name, after the object's name.
pub const MANIFEST_SUFFIX: &str = ".yaml";

/// A directory every scope may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ScopeDir {
    /// The manifests of one kind of object, `<name>.yaml` each.
    Objects(ObjectKind),
    /// The file store's MAC records, `<pool>-<12 hex digits>` each (`store::fs::macs`).
    Macs,
}

impl ScopeDir {
    /// Every directory of a scope: the segments a namespace may not take.
    pub const ALL: [ScopeDir; 7] = [
        ScopeDir::Objects(ObjectKind::Pool),
        ScopeDir::Objects(ObjectKind::Allocation),
        ScopeDir::Objects(ObjectKind::Subnet),
        ScopeDir::Objects(ObjectKind::Cooldown),
        ScopeDir::Objects(ObjectKind::PrefixClaim),
        ScopeDir::Objects(ObjectKind::Quota),
        ScopeDir::Macs,
    ];

    /// The directory's name.
    pub const fn name(self) -> &'static str {
        match self {
            ScopeDir::Objects(ObjectKind::Pool) => "ipampools",
            ScopeDir::Objects(ObjectKind::Allocation) => "ipallocations",
            ScopeDir::Objects(ObjectKind::Subnet) => "subnets",
            ScopeDir::Objects(ObjectKind::Cooldown) => "cooldown",
            ScopeDir::Objects(ObjectKind::PrefixClaim) => "ipprefixclaims",
            ScopeDir::Objects(ObjectKind::Quota) => "quotas",
            ScopeDir::Macs => "macs",
        }
    }

    /// The directory named `name`, if a scope has one.
    pub fn from_name(name: &str) -> Option<ScopeDir> {
        ScopeDir::ALL.into_iter().find(|d| d.name() == name)
    }
}

impl ObjectKind {
    /// The directory of this kind's manifests in every scope.
    pub const fn dir(self) -> &'static str {
        ScopeDir::Objects(self).name()
    }
}

/// The directory of scope `ns` (`None`: the cluster scope), relative to the root and
/// `/`-separated: `cluster` or `namespaces/<ns>`.
pub fn scope_path(ns: Option<&Namespace>) -> String {
    match ns {
        None => CLUSTER.to_owned(),
        Some(ns) => format!("{NAMESPACES}/{ns}"),
    }
}

/// The directory `dir` of scope `ns`, relative to the root.
pub fn dir_path(dir: ScopeDir, ns: Option<&Namespace>) -> String {
    format!("{}/{}", scope_path(ns), dir.name())
}

/// The manifest of the object `name` of `kind` in scope `ns`, relative to the root:
/// `<scope>/<kind's directory>/<name>.yaml`.
pub fn object_path(kind: ObjectKind, ns: Option<&Namespace>, name: &str) -> String {
    format!(
        "{}/{name}{MANIFEST_SUFFIX}",
        dir_path(ScopeDir::Objects(kind), ns)
    )
}

/// Where a manifest's path (relative to the root, `/`-separated) puts it: (kind, scope,
/// object name). The inverse of [`object_path`] on the paths it makes; `None` for a path
/// of no object (another directory, a scope that is no namespace, no `.yaml`).
pub fn locate(path: &str) -> Option<(ObjectKind, Option<Namespace>, String)> {
    let file = path.strip_suffix(MANIFEST_SUFFIX)?;
    let (dir, name) = file.rsplit_once('/')?;
    let (scope, dir) = dir.rsplit_once('/')?;
    let ScopeDir::Objects(kind) = ScopeDir::from_name(dir)? else {
        return None;
    };
    let ns = match scope {
        CLUSTER => None,
        _ => Some(Namespace::new(scope.strip_prefix(NAMESPACES)?.strip_prefix('/')?).ok()?),
    };
    Some((kind, ns, name.to_owned()))
}

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    use super::*;

    /// Segments chosen to collide: every directory of the layout, the root's two, a MAC
    /// record's name and a manifest's, and two plain ones.
    fn segments() -> Vec<String> {
        let mut s: Vec<String> = ScopeDir::ALL.iter().map(|d| d.name().to_owned()).collect();
        s.extend([CLUSTER, NAMESPACES, "p-5254004d0001", "q.yaml", "a", "p"].map(str::to_owned));
        s
    }

    /// Every namespace of at most three of [`segments`] that is one, and the cluster scope.
    fn scopes() -> Vec<Option<Namespace>> {
        let segments = segments();
        let mut names: Vec<String> = segments.clone();
        let mut last = segments.clone();
        for _ in 1..3 {
            last = last
                .iter()
                .flat_map(|p| segments.iter().map(move |s| format!("{p}/{s}")))
                .collect();
            names.extend(last.iter().cloned());
        }
        let mut scopes: Vec<Option<Namespace>> = names
            .iter()
            .filter_map(|n| Namespace::new(n).ok())
            .map(Some)
            .collect();
        scopes.push(None);
        scopes
    }

    #[test]
    fn no_namespace_segment_is_a_directory_of_the_layout() {
        for dir in ScopeDir::ALL {
            let name = dir.name();
            assert_eq!(ScopeDir::from_name(name), Some(dir));
            for ns in [name.to_owned(), format!("a/{name}"), format!("{name}/a")] {
                let err = Namespace::new(&ns).expect_err(&ns);
                assert!(
                    err.contains(&format!("segment `{name}` is reserved")),
                    "{err}"
                );
            }
        }
        // The kinds' directories are the scope's object directories, one each.
        let dirs: HashSet<&str> = ObjectKind::ALL.iter().map(|k| k.dir()).collect();
        assert_eq!(dirs.len(), ObjectKind::ALL.len());
        assert!(!dirs.contains(ScopeDir::Macs.name()));
    }

    /// Every file the layout places, in every scope of [`scopes`] and under every name of
    /// [`segments`]: no two land on one path, and no path is a directory on the way to
    /// another (a namespace `a/macs` would make `namespaces/a/macs`, scope `a`'s MAC
    /// records, its directory). Exhaustive over a domain built to collide: 6 directories,
    /// 156 scopes, 12 names (11,232 paths).
    #[test]
    fn every_directory_of_the_layout_names_one_thing() {
        let mut placed: HashMap<String, (ScopeDir, Option<Namespace>, String)> = HashMap::new();
        for ns in scopes() {
            for dir in ScopeDir::ALL {
                for name in segments() {
                    let path = match dir {
                        ScopeDir::Objects(kind) => object_path(kind, ns.as_ref(), &name),
                        ScopeDir::Macs => format!("{}/{name}", dir_path(dir, ns.as_ref())),
                    };
                    let entry = (dir, ns.clone(), name);
                    if let Some(other) = placed.insert(path.clone(), entry.clone()) {
                        panic!("{path} is both {other:?} and {entry:?}");
                    }
                }
            }
        }
        assert!(placed.len() > 10_000, "{}", placed.len());
        for (path, entry) in &placed {
            let mut at = path.as_str();
            while let Some((parent, _)) = at.rsplit_once('/') {
                if let Some(other) = placed.get(parent) {
                    panic!("{parent} is {other:?}, and a directory of {path} ({entry:?})");
                }
                at = parent;
            }
        }
    }

    #[test]
    fn locate_reads_back_every_object_path() {
        for ns in scopes() {
            for kind in ObjectKind::ALL {
                for name in segments() {
                    let path = object_path(kind, ns.as_ref(), &name);
                    assert_eq!(locate(&path), Some((kind, ns.clone(), name)), "{path}");
                }
            }
        }
        for other in [
            "cluster/macs/p-5254004d0001.yaml",
            "namespaces/a/macs/ipampools/q.yaml",
            "cluster/ipampools/q.yml",
            "namespaces/ipampools/q.yaml",
            "elsewhere/ipampools/q.yaml",
            "ipampools/q.yaml",
        ] {
            assert_eq!(locate(other), None, "{other}");
        }
    }
}
