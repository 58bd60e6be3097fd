//! The engine operations the API's resolvers call (`claimFloatingIp`, `releaseFloatingIp`,
//! `createPublicPool`, `createVpc`, `deleteVpc`, `createSubnet`, `deleteSubnet`), called
//! through the library with a token's scope as a server will: outside the scope is "not
//! found" (the same answer as for what does not exist), a verb the token lacks is
//! "forbidden", and a refused call writes nothing (what `ipamctl` lists before and after is
//! the same). Under `IPAMCTL_TEST_STORE=postgres` the store is a PostgreSQL database.

mod common;

use std::sync::atomic::AtomicBool;

use common::{BIN, on_postgres, pg};
use ipamctl::Error;
use ipamctl::engine::admin::{
    self, CreatePublicPoolInput, CreateSubnetInput, CreateVpcInput, DeleteSubnetInput,
    DeleteVpcInput, Deletion, PublicPool, SubnetCreate, SubnetDelete, VpcCreate, VpcDelete,
};
use ipamctl::engine::allocate::Allocated;
use ipamctl::engine::floating::{
    self, ClaimFloatingInput, FloatingClaim, FloatingRelease, ReleaseFloatingInput,
};
use ipamctl::engine::scope::{Pattern, Scope, Verb};
use ipamctl::engine::subnet::Put;
use ipamctl::engine::warning::Warnings;
use ipamctl::store::Store;
use ipamctl::store::registry::{Config, Location};

/// `pub-a` (192.0.2.0/29) public in zone `eu`, and `web` (10.1.0.0/24), a private pool of
/// `acme`.
const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: pub-a
spec:
  cidr: 192.0.2.0/29
  kind: public
  zone: eu
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: web
  namespace: acme
spec:
  cidr: 10.1.0.0/24
  kind: private
";

/// A store with [`POOLS`]: a state directory, or a database under
/// `IPAMCTL_TEST_STORE=postgres`; and the `ipamctl` commands that read it.
struct Lab {
    dir: tempfile::TempDir,
    db: Option<pg::Db>,
    store: Box<dyn Store + Sync>,
}

impl Lab {
    fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let db = on_postgres().then(pg::Db::new);
        let location = match &db {
            Some(db) => Location::Database(db.url.clone()),
            None => {
                let state = dir.path().join("state");
                let out = std::process::Command::new(BIN)
                    .arg("init")
                    .arg(&state)
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                Location::Dir(Some(state))
            }
        };
        let store = ipamctl::store::registry::open(
            &location,
            &Config {
                workers: 1,
                warn: &|_| {},
                long_lived: false,
            },
        )
        .unwrap();
        let lab = Lab { dir, db, store };
        let file = lab.dir.path().join("pools.yaml");
        std::fs::write(&file, POOLS).unwrap();
        lab.ipamctl(&["apply", "-f", file.to_str().unwrap()]);
        lab
    }

    /// `ipamctl ARGS` on the lab's store; its stdout (it must succeed).
    fn ipamctl(&self, args: &[&str]) -> String {
        let mut cmd = std::process::Command::new(BIN);
        match &self.db {
            Some(db) => cmd.arg("--store").arg(&db.url),
            None => cmd.arg("-d").arg(self.dir.path().join("state")),
        };
        let out = cmd.args(args).env("NO_COLOR", "1").output().unwrap();
        assert!(out.status.success(), "ipamctl {args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// Everything the store holds, as `ipamctl` lists it.
    fn snapshot(&self) -> String {
        ["list", "pool list", "subnet list", "vpc list"]
            .iter()
            .map(|c| {
                let mut args: Vec<&str> = c.split(' ').collect();
                args.extend(["-o", "json"]);
                self.ipamctl(&args)
            })
            .collect()
    }

    fn store(&self) -> &(dyn Store + Sync) {
        self.store.as_ref()
    }
}

fn token(patterns: &[&str], verbs: &[Verb], cluster: bool) -> Scope {
    Scope::token(
        patterns
            .iter()
            .map(|p| Pattern::parse(p).unwrap())
            .collect(),
        verbs.to_vec(),
        cluster,
    )
}

/// Runs `refused` on `lab` and asserts it is not found (`forbidden` false) or forbidden,
/// and that nothing was written.
#[track_caller]
fn refused<T: std::fmt::Debug>(
    lab: &Lab,
    forbidden: bool,
    refused: impl FnOnce() -> ipamctl::Result<T>,
) {
    let before = lab.snapshot();
    let got = refused();
    match (&got, forbidden) {
        (Err(Error::NotFound { .. }), false) | (Err(Error::Forbidden { .. }), true) => {}
        _ => panic!(
            "expected {}, got {got:?}",
            if forbidden { "forbidden" } else { "not found" }
        ),
    }
    assert_eq!(lab.snapshot(), before, "a refused call wrote");
}

fn fip(namespace: &str, name: &str) -> FloatingClaim {
    FloatingClaim::new(&ClaimFloatingInput {
        namespace: namespace.into(),
        name: name.into(),
        zone: Some("eu".into()),
        ..ClaimFloatingInput::default()
    })
    .unwrap()
}

fn address(allocated: &Allocated) -> String {
    allocated.manifest().spec.address.to_string()
}

#[test]
fn a_tenants_claim_reaches_the_public_pools_and_another_tenant_is_not_found() {
    let lab = Lab::new();
    let acme = token(&["acme"], &[Verb::Claim], false);
    let beta = token(&["beta"], &[Verb::Read, Verb::Claim], false);
    // `claim` in its namespace is enough, without the cluster scope.
    let a = floating::claim(lab.store(), &acme, &fip("acme", "fip-web"))
        .result
        .unwrap();
    assert!(matches!(a, Allocated::Created(_)), "{a:?}");
    assert_eq!(address(&a), "192.0.2.1");
    let b = floating::claim(lab.store(), &beta, &fip("beta", "fip-web"))
        .result
        .unwrap();
    assert_eq!(address(&b), "192.0.2.2");
    let again = floating::claim(lab.store(), &acme, &fip("acme", "fip-web"))
        .result
        .unwrap();
    assert!(matches!(again, Allocated::Existing(_)), "{again:?}");
    assert_eq!(address(&again), "192.0.2.1");
    // For another namespace: not found; without `claim`: forbidden; nothing written.
    refused(&lab, false, || {
        floating::claim(lab.store(), &acme, &fip("beta", "fip-db")).result
    });
    let reader = token(&["acme"], &[Verb::Read], false);
    refused(&lab, true, || {
        floating::claim(lab.store(), &reader, &fip("acme", "fip-db")).result
    });
    // Beta sees only its own; releasing acme's name releases beta's own, never acme's.
    let mut warnings = Warnings::default();
    let seen = floating::list(lab.store(), &beta, None, &mut warnings).unwrap();
    let seen: Vec<String> = seen.iter().map(|m| m.spec.owner.to_string()).collect();
    assert_eq!(seen, ["FloatingIP/beta/fip-web"]);
    refused(&lab, false, || {
        floating::list(lab.store(), &beta, Some("acme"), &mut Warnings::default())
    });
    let release = |ns: &str| {
        FloatingRelease::new(&ReleaseFloatingInput {
            namespace: ns.into(),
            name: "fip-web".into(),
            ..ReleaseFloatingInput::default()
        })
        .unwrap()
    };
    refused(&lab, false, || {
        floating::release(lab.store(), &beta, &release("acme")).result
    });
    let freed = floating::release(lab.store(), &beta, &release("beta"))
        .result
        .unwrap();
    let freed: Vec<String> = freed
        .addresses
        .iter()
        .map(|m| m.spec.address.to_string())
        .collect();
    assert_eq!(freed, ["192.0.2.2"]);
    let gone = floating::release(lab.store(), &beta, &release("beta")).result;
    assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
    assert!(
        lab.ipamctl(&["list", "--tenant", "acme", "-o", "name"])
            .contains("pub-a-192-0-2-1")
    );
}

#[test]
fn a_public_pool_needs_admin_in_the_cluster_scope() {
    let lab = Lab::new();
    let pool = PublicPool::new(&CreatePublicPoolInput {
        name: "pub-b".into(),
        cidr: "198.51.100.0/29".into(),
        gateway: Some("198.51.100.1".into()),
        exclude: vec!["198.51.100.6".into()],
        zone: Some("eu".into()),
        ..CreatePublicPoolInput::default()
    })
    .unwrap();
    refused(&lab, false, || {
        admin::create_public_pool(lab.store(), &token(&["*"], &Verb::ALL, false), &pool)
    });
    refused(&lab, true, || {
        admin::create_public_pool(
            lab.store(),
            &token(&[], &[Verb::Read, Verb::Claim], true),
            &pool,
        )
    });
    let cluster_admin = token(&[], &[Verb::Admin], true);
    let (made, put) = admin::create_public_pool(lab.store(), &cluster_admin, &pool).unwrap();
    assert_eq!((made.metadata.name.as_str(), put), ("pub-b", Put::Created));
    let (_, put) = admin::create_public_pool(lab.store(), &cluster_admin, &pool).unwrap();
    assert_eq!(put, Put::Unchanged);
    // Another spec under the name, or an overlap: a conflict, nothing written.
    let other = |name: &str, cidr: &str| {
        PublicPool::new(&CreatePublicPoolInput {
            name: name.into(),
            cidr: cidr.into(),
            ..CreatePublicPoolInput::default()
        })
        .unwrap()
    };
    for pool in [
        other("pub-b", "198.51.100.0/28"),
        other("pub-c", "192.0.2.0/30"),
    ] {
        let before = lab.snapshot();
        let got = admin::create_public_pool(lab.store(), &cluster_admin, &pool);
        assert!(matches!(got, Err(Error::Conflict { .. })), "{got:?}");
        assert_eq!(lab.snapshot(), before);
    }
    let bad = PublicPool::new(&CreatePublicPoolInput {
        name: "pub-d".into(),
        cidr: "203.0.113.0/29".into(),
        gateway: Some("10.0.0.1".into()),
        ..CreatePublicPoolInput::default()
    });
    assert!(matches!(bad, Err(Error::Invalid { .. })), "{bad:?}");
}

#[test]
fn a_vpc_and_its_uplink_need_admin_in_its_namespace_and_the_same_vpc_answers_the_same() {
    let lab = Lab::new();
    let input = CreateVpcInput {
        name: "main".into(),
        namespace: "acme".into(),
        cidrs: vec!["10.9.0.0/24".into()],
        uplink_zone: Some("eu".into()),
        ..CreateVpcInput::default()
    };
    let vpc = VpcCreate::new(&input).unwrap();
    let mut warnings = Warnings::default();
    refused(&lab, false, || {
        admin::create_vpc(
            lab.store(),
            &token(&["beta"], &Verb::ALL, true),
            &vpc,
            &mut Warnings::default(),
        )
    });
    refused(&lab, true, || {
        admin::create_vpc(
            lab.store(),
            &token(&["acme"], &[Verb::Read, Verb::Claim], false),
            &vpc,
            &mut Warnings::default(),
        )
    });
    let acme_admin = token(&["acme"], &[Verb::Admin], false);
    let made = admin::create_vpc(lab.store(), &acme_admin, &vpc, &mut warnings).unwrap();
    let uplink = made.uplink.expect("an uplink zone claims the uplink");
    assert_eq!(address(&uplink), "192.0.2.1");
    assert_eq!(uplink.manifest().spec.owner.uid(), Some(&made.created.uid));
    let again = admin::create_vpc(lab.store(), &acme_admin, &vpc, &mut warnings).unwrap();
    assert_eq!(again.created.uid, made.created.uid);
    let uplink = again.uplink.unwrap();
    assert!(matches!(uplink, Allocated::Existing(_)), "{uplink:?}");
    assert_eq!(address(&uplink), "192.0.2.1");
    // Delete: outside the scope not found, then deleted with its uplink, then absent.
    let delete = |ignore_not_found| {
        VpcDelete::new(&DeleteVpcInput {
            name: "main".into(),
            namespace: "acme".into(),
            ignore_not_found,
            ..DeleteVpcInput::default()
        })
        .unwrap()
    };
    let stop = AtomicBool::new(false);
    refused(&lab, false, || {
        admin::delete_vpc(
            lab.store(),
            &token(&["beta"], &Verb::ALL, true),
            &delete(false),
            &stop,
            &mut Warnings::default(),
        )
    });
    refused(&lab, true, || {
        admin::delete_vpc(
            lab.store(),
            &token(&["acme"], &[Verb::Claim], true),
            &delete(false),
            &stop,
            &mut Warnings::default(),
        )
    });
    let Deletion::Deleted(deleted) = admin::delete_vpc(
        lab.store(),
        &acme_admin,
        &delete(false),
        &stop,
        &mut warnings,
    )
    .unwrap() else {
        panic!("the VPC exists");
    };
    assert!(deleted.kept.is_none());
    assert!(lab.ipamctl(&["list", "-o", "name"]).is_empty());
    let gone = admin::delete_vpc(
        lab.store(),
        &acme_admin,
        &delete(true),
        &stop,
        &mut warnings,
    )
    .unwrap();
    assert!(matches!(gone, Deletion::Absent(_)), "{gone:?}");
    let gone = admin::delete_vpc(
        lab.store(),
        &acme_admin,
        &delete(false),
        &stop,
        &mut warnings,
    );
    assert!(matches!(gone, Err(Error::NotFound { .. })), "{gone:?}");
}

#[test]
fn a_subnet_needs_admin_in_its_namespace() {
    let lab = Lab::new();
    let subnet = SubnetCreate::new(&CreateSubnetInput {
        name: "front".into(),
        namespace: Some("acme".into()),
        pool: "web".into(),
        prefix_length: Some(28),
        ..CreateSubnetInput::default()
    })
    .unwrap();
    refused(&lab, false, || {
        admin::create_subnet(lab.store(), &token(&["beta"], &Verb::ALL, true), &subnet)
    });
    refused(&lab, true, || {
        admin::create_subnet(
            lab.store(),
            &token(&["acme"], &[Verb::Read], false),
            &subnet,
        )
    });
    let acme_admin = token(&["acme/*", "acme"], &[Verb::Admin], false);
    let (made, put) = admin::create_subnet(lab.store(), &acme_admin, &subnet).unwrap();
    assert_eq!(
        (made.spec.cidr.to_string().as_str(), put),
        ("10.1.0.0/28", Put::Created)
    );
    let (_, put) = admin::create_subnet(lab.store(), &acme_admin, &subnet).unwrap();
    assert_eq!(put, Put::Unchanged);
    let given = SubnetCreate::new(&CreateSubnetInput {
        name: "back".into(),
        namespace: Some("acme".into()),
        pool: "web".into(),
        cidr: Some("10.1.0.64/26".into()),
        gateway: Some("10.1.0.65".into()),
        reserved: vec!["10.1.0.66".into()],
        ..CreateSubnetInput::default()
    })
    .unwrap();
    assert_eq!(
        admin::create_subnet(lab.store(), &acme_admin, &given)
            .unwrap()
            .1,
        Put::Created
    );
    let both = SubnetCreate::new(&CreateSubnetInput {
        name: "x".into(),
        pool: "web".into(),
        cidr: Some("10.1.0.128/28".into()),
        prefix_length: Some(28),
        ..CreateSubnetInput::default()
    });
    assert!(matches!(both, Err(Error::Usage { .. })), "{both:?}");
    let delete = |name: &str, ignore_not_found| {
        SubnetDelete::new(&DeleteSubnetInput {
            name: name.into(),
            namespace: Some("acme".into()),
            ignore_not_found,
            ..DeleteSubnetInput::default()
        })
        .unwrap()
    };
    refused(&lab, false, || {
        admin::delete_subnet(
            lab.store(),
            &token(&["beta"], &Verb::ALL, true),
            &delete("front", false),
        )
    });
    refused(&lab, true, || {
        admin::delete_subnet(
            lab.store(),
            &token(&["acme"], &[Verb::Claim], false),
            &delete("front", false),
        )
    });
    let deleted = admin::delete_subnet(lab.store(), &acme_admin, &delete("front", false)).unwrap();
    assert!(
        matches!(deleted, Deletion::Deleted(ref s) if s.metadata.name == "front"),
        "{deleted:?}"
    );
    let absent = admin::delete_subnet(lab.store(), &acme_admin, &delete("front", true)).unwrap();
    assert!(matches!(absent, Deletion::Absent(_)), "{absent:?}");
}
