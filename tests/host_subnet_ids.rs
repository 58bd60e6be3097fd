//! Adding a subnet or pool never moves an existing one's DHCP subnet id, even when its name
//! is chosen to collide. Ids are the FNV-1a hash of `namespace \0 pool \0 subnet`, and of
//! two that collide the one created first keeps the hash (one without a recorded creation
//! time counts as the oldest): so a new pool or subnet that would move an existing id is
//! written with the time ipamctl created it, never one taken from the input. The pair is
//! the adversarial pass's (issue 44): pool `evil/ceynmgdc` hashes as subnet `lab/hosts/web`.

mod host;

use host::Lab;

/// FNV-1a of `lab \0 hosts \0 web`, which `evil \0 ceynmgdc \0` hashes to too.
const WEB_ID: u64 = 0xd428_ee91;

/// The lab, with pool `lab/hosts` and its subnet `web`.
fn lab() -> Lab {
    let lab = Lab::new();
    lab.apply(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: hosts, namespace: lab}\nspec: {cidr: 10.77.0.0/16, kind: private}\n",
    );
    lab.ok(&[
        "-n",
        "lab",
        "subnet",
        "create",
        "--pool",
        "hosts",
        "--cidr",
        "10.77.1.0/24",
        "web",
    ]);
    lab
}

/// The Kea4 subnet ids of the whole export, by prefix.
fn ids(lab: &Lab) -> Vec<(String, u64)> {
    host::kea4_ids(&lab.stdout(&["dhcp", "export", "--format", "kea4"]))
}

fn web_id(lab: &Lab) -> u64 {
    ids(lab)
        .into_iter()
        .find(|(cidr, _)| cidr == "10.77.1.0/24")
        .expect("web exported")
        .1
}

/// The colliding pool, applied with `metadata` fields `extra` (a claimed creation time).
fn evil(lab: &Lab, extra: &str) {
    lab.apply(&format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {{name: ceynmgdc, namespace: evil{extra}}}\nspec: {{cidr: 198.51.100.0/24, kind: private}}\n"
    ));
}

fn a_colliding_pool_moves_no_id(lab: &Lab) {
    assert_eq!(web_id(lab), WEB_ID, "web has its hash before");
    // Applied plainly, then again claiming to be older than everything.
    evil(lab, "");
    assert_eq!(web_id(lab), WEB_ID, "a colliding pool took web's id");
    evil(lab, ", creationTimestamp: '2000-01-01T00:00:00Z'");
    assert_eq!(web_id(lab), WEB_ID, "a claimed creation time took web's id");
    let all = ids(lab);
    let evil_id = all
        .iter()
        .find(|(cidr, _)| cidr == "198.51.100.0/24")
        .expect("the pool exported")
        .1;
    assert_eq!(evil_id, WEB_ID + 1, "{all:?}");
}

#[test]
fn a_pool_named_to_collide_moves_no_existing_subnet_id() {
    a_colliding_pool_moves_no_id(&lab());
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_pool_named_to_collide_moves_no_existing_subnet_id_on_postgres() {
    a_colliding_pool_moves_no_id(&lab().into_database());
}

#[test]
fn a_subnet_created_before_keeps_its_id_when_its_pool_is_applied_again() {
    // Applying the same manifests again (as GitOps does on every commit) keeps the recorded
    // creation: `unchanged`, and the subnet's id stays.
    let lab = lab();
    let before = web_id(&lab);
    let pools = lab.tmp.path().join("pools.yaml");
    let out = lab.stdout(&["apply", "-f", pools.to_str().unwrap()]);
    assert!(out.lines().all(|l| l.ends_with("unchanged")), "{out}");
    evil(&lab, "");
    evil(&lab, "");
    assert_eq!(web_id(&lab), before);
}

#[test]
fn only_a_colliding_object_records_its_creation_time() {
    // The usual pool or subnet is written as before (no `creationTimestamp`): the GitOps
    // diff of an apply is the manifest applied. The colliding pool carries the time it was
    // made, which an input cannot set.
    let lab = lab();
    let state = lab.state();
    let web = std::fs::read_to_string(state.join("namespaces/lab/subnets/web.yaml")).unwrap();
    assert!(!web.contains("creationTimestamp"), "{web}");
    evil(&lab, ", creationTimestamp: '2000-01-01T00:00:00Z'");
    let path = state.join("namespaces/evil/ipampools/ceynmgdc.yaml");
    let evil = std::fs::read_to_string(path).unwrap();
    assert!(
        evil.contains("creationTimestamp: \"20") && !evil.contains("2000-01-01"),
        "{evil}"
    );
}
