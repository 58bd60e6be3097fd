//! MACs on NICs (issue 30): `allocate --mac`, `--mac auto`, `mac set`, `list --mac` and the
//! MAC column, and `check`'s MAC rules, driving the real binary. Under
//! `IPAMCTL_TEST_STORE=postgres` every command but the file-store-only ones runs on
//! PostgreSQL with the same assertions (`.ci/run`).

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};

use common::{BIN, Test, code, list_items};

/// `lan` (10.0.0.0/24, macPrefix 52:54:00), `lan6` (2001:db8:6::/64, no prefix), `plain`
/// (10.9.0.0/24, no prefix): public pools.
const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lan
spec:
  cidr: 10.0.0.0/24
  kind: public
  gateway: 10.0.0.1
  macPrefix: '52:54:00'
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: lan6
spec:
  cidr: 2001:db8:6::/64
  kind: public
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: plain
spec:
  cidr: 10.9.0.0/24
  kind: public
";

const WEB1: &str = "VirtualMachine/web-01/0";
const WEB2: &str = "VirtualMachine/web-02/0";

fn pools() -> Test {
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(POOLS)
        .run()
        .then()
}

fn allocate<'a>(pool: &'a str, owner: &'a str, mac: &'a str) -> Vec<&'a str> {
    vec!["allocate", pool, "--owner", owner, "--mac", mac]
}

#[test]
fn a_mac_in_any_spelling_is_stored_lowercase_with_colons_and_listed() {
    let ran = pools()
        .args(allocate("lan", WEB1, "02-54-00-AB-CD-EF"))
        .stdout("10.0.0.2\n")
        .run();
    let file = ran.read("cluster/ipallocations/lan-10-0-0-2.yaml");
    assert!(file.ends_with("  mac: 02:54:00:ab:cd:ef\n"), "{file}");
    let ran = ran.then().args(["list", "-o", "wide"]).run();
    assert!(
        ran.stdout.starts_with(
            "NAMESPACE  POOL  ADDRESS   OWNER                    UID  MAC                EXPIRES  NAME"
        ),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout
            .contains("02:54:00:ab:cd:ef  -        lan-10-0-0-2"),
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["list", "--mac", "0254.00ab.cdef", "-o", "json"])
        .run();
    let items = list_items(&ran.stdout);
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["spec"]["mac"], "02:54:00:ab:cd:ef");
    assert_eq!(items[0]["spec"]["owner"]["name"], "web-01/0");
    ran.then()
        .args(["list", "--mac", "02:54:00:00:00:99"])
        .stderr("No allocations found.\n")
        .run();
}

#[test]
fn only_a_nic_has_a_mac_and_a_bad_one_is_refused_naming_it() {
    pools()
        .args(allocate("lan", "FloatingIP/fip-1", "52:54:00:00:00:01"))
        .fails(code::INVALID)
        .stderr("error: --mac: owner `FloatingIP/fip-1` is a FloatingIP and has no NIC; a MAC is for `VirtualMachine` and `Node` owners\n")
        .run()
        .then()
        .args(allocate("lan", "Node/10.0.0.0/24", "02:54:00:00:00:01"))
        .stdout("10.0.0.2\n")
        .run()
        .then()
        .args(allocate("lan", WEB1, "01:00:5e:00:00:01"))
        .fails(code::INVALID)
        .stderr("error: --mac: invalid MAC `01:00:5e:00:00:01`: it is a multicast MAC (the lowest bit of the first octet is set); a NIC's MAC is unicast\n")
        .run()
        .then()
        .args(allocate("lan", WEB1, "ff:ff:ff:ff:ff:ff"))
        .fails(code::INVALID)
        .run()
        .then()
        .args(allocate("lan", WEB1, "00:00:00:00:00:00"))
        .fails(code::INVALID)
        .run()
        .then()
        .args(allocate("lan", WEB1, "52:54:00:zz:00:01"))
        .fails(code::INVALID)
        .run()
        .then()
        // The pool's macPrefix block is `--mac auto`'s.
        .args(allocate("lan", WEB1, "52:54:00:00:00:09"))
        .stderr("error: --mac: MAC 52:54:00:00:00:09 lies in pool `lan`'s macPrefix 52:54:00, which `--mac auto` keeps for the MACs it derives from addresses; use `--mac auto`, or a MAC outside 52:54:00\n")
        .fails(code::INVALID)
        .run();
}

#[test]
fn a_mac_is_held_once_per_pool_and_the_same_owner_gets_its_address_back() {
    pools()
        .args(allocate("lan", WEB1, "02:54:00:00:00:aa"))
        .stdout("10.0.0.2\n")
        .run()
        .then()
        .args(allocate("lan", WEB2, "02:54:00:00:00:AA"))
        .fails(code::CONFLICT)
        .stderr("error: MAC 02:54:00:00:00:aa is held in pool `lan` by `VirtualMachine/web-01/0` (10.0.0.2); a MAC names one NIC per pool\n")
        .run()
        .then()
        // Another pool is another segment: the same MAC is free there.
        .args(allocate("plain", WEB2, "02:54:00:00:00:aa"))
        .stdout("10.9.0.1\n")
        .run()
        .then()
        .args(allocate("lan", WEB1, "02:54:00:00:00:aa"))
        .stdout("10.0.0.2\n")
        .unchanged()
        .run()
        .then()
        // Without --mac the owner's allocation is the answer as before.
        .args(["allocate", "lan", "--owner", WEB1])
        .stdout("10.0.0.2\n")
        .unchanged()
        .run()
        .then()
        .args(allocate("lan", WEB1, "02:54:00:00:00:bb"))
        .fails(code::CONFLICT)
        .stderr("error: owner `VirtualMachine/web-01/0` already holds 10.0.0.2 in pool `lan` with MAC 02:54:00:00:00:aa, not 02:54:00:00:00:bb\nhint: to give its NIC the new MAC (it keeps its address): ipamctl mac set lan 10.0.0.2 --owner VirtualMachine/web-01/0 --mac 02:54:00:00:00:bb\n")
        .run()
        .then()
        // A release frees the MAC for another NIC.
        .args(["release", "lan", "10.0.0.2", "--owner", WEB1])
        .run()
        .then()
        .args(allocate("lan", WEB2, "02:54:00:00:00:aa"))
        .stdout("10.0.0.2\n")
        .run();
}

#[test]
fn mac_set_changes_a_nics_mac_guarded_by_its_owner() {
    let ran = pools()
        .args(allocate("lan", WEB1, "02:54:00:00:00:aa"))
        .stdout("10.0.0.2\n")
        .run()
        .then()
        .args(allocate("lan", WEB2, "02:54:00:00:00:bb"))
        .stdout("10.0.0.3\n")
        .run()
        .then()
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB2, "--mac", "02:54:00:00:00:cc"])
        .fails(code::CONFLICT)
        .stderr("error: 10.0.0.2 in pool `lan` is held by `VirtualMachine/web-01/0`, not `VirtualMachine/web-02/0`; its MAC is left as it is\n")
        .run()
        .then()
        .args(["mac", "set", "lan", "10.0.0.9", "--owner", WEB1, "--mac", "02:54:00:00:00:cc"])
        .fails(code::NOT_FOUND)
        .run()
        .then()
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", "02:54:00:00:00:bb"])
        .fails(code::CONFLICT)
        .stderr("error: MAC 02:54:00:00:00:bb is held in pool `lan` by `VirtualMachine/web-02/0` (10.0.0.3); a MAC names one NIC per pool\n")
        .run()
        .then()
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", "02:54:00:00:00:cc"])
        .stdout("ipallocation/lan-10-0-0-2 configured\n")
        .run()
        .then()
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", "02:54:00:00:00:cc"])
        .stdout("ipallocation/lan-10-0-0-2 unchanged\n")
        .unchanged()
        .run()
        .then()
        // The old MAC is free again; the new one is the NIC's.
        .args(allocate("lan", "VirtualMachine/web-03/0", "02:54:00:00:00:aa"))
        .stdout("10.0.0.4\n")
        .run()
        .then()
        .args(allocate("lan", WEB1, "02:54:00:00:00:cc"))
        .stdout("10.0.0.2\n")
        .run();
    assert!(
        ran.read("cluster/ipallocations/lan-10-0-0-2.yaml")
            .ends_with("  mac: 02:54:00:00:00:cc\n")
    );
    ran.then()
        .args([
            "mac",
            "set",
            "lan",
            "10.0.0.2",
            "--owner",
            "FloatingIP/x",
            "--mac",
            "auto",
        ])
        .fails(code::INVALID)
        .run();
}

#[test]
fn mac_auto_derives_from_the_pools_prefix_and_the_address() {
    let ran = pools()
        .args([
            "allocate", "lan", "--owner", WEB1, "--mac", "auto", "-o", "json",
        ])
        .run();
    let item: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(item["spec"]["address"], "10.0.0.2");
    assert_eq!(item["spec"]["mac"], "52:54:00:00:00:02");
    ran.then()
        .args(allocate("lan", WEB1, "auto"))
        .stdout("10.0.0.2\n")
        .unchanged()
        .run()
        .then()
        .args(allocate("plain", WEB1, "auto"))
        .fails(code::INVALID)
        .stderr("error: --mac: `--mac auto` derives a MAC from pool `plain`'s spec.macPrefix, and it has none; add one (e.g. `macPrefix: '52:54:00'`) with `ipamctl apply`, or give the MAC\n")
        .run();
}

#[test]
fn a_dual_stack_nic_gets_one_mac_on_each_allocation() {
    let ran = pools()
        .args([
            "allocate", "lan", "lan6", "--owner", WEB1, "--mac", "auto", "-o", "json",
        ])
        .run();
    let items = list_items(&ran.stdout);
    let macs: Vec<_> = items.iter().map(|i| i["spec"]["mac"].clone()).collect();
    // Derived from the first pool's address, 10.0.0.2.
    assert_eq!(macs, ["52:54:00:00:00:02", "52:54:00:00:00:02"]);
    let ran = ran
        .then()
        .args([
            "allocate",
            "lan6",
            "lan",
            "--owner",
            WEB2,
            "--mac",
            "02:54:00:12:34:56",
            "-o",
            "json",
        ])
        .run();
    let items = list_items(&ran.stdout);
    assert!(
        items
            .iter()
            .all(|i| i["spec"]["mac"] == "02:54:00:12:34:56")
    );
    // The second pool's MAC is taken: all or nothing, the first pool's claim is undone.
    ran.then()
        .args([
            "allocate",
            "plain",
            "lan",
            "--owner",
            "VirtualMachine/web-03/0",
            "--mac",
            "02:54:00:12:34:56",
        ])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["check"])
        .stdout("")
        .run();
}

#[test]
fn apply_refuses_an_invalid_mac_prefix() {
    let yaml = POOLS.replace("macPrefix: '52:54:00'", "macPrefix: '00:16:3e'");
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&yaml)
        .fails(code::INVALID)
        .run();
    let yaml = POOLS.replace("macPrefix: '52:54:00'", "macPrefix: '52:54'");
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&yaml)
        .fails(code::INVALID)
        .run();
}

/// A state with web-01 at 10.0.0.2 (auto MAC) and web-02 at 10.0.0.3 (a given MAC).
fn two_nics() -> Test {
    pools()
        .args(allocate("lan", WEB1, "auto"))
        .stdout("10.0.0.2\n")
        .run()
        .then()
        .args(allocate("lan", WEB2, "02:00:00:00:00:01"))
        .stdout("10.0.0.3\n")
        .run()
        .then()
}

fn edit(test: &Test, rel: &str, from: &str, to: &str) {
    let text = test.read(rel);
    assert!(text.contains(from), "{text}");
    test.write(rel, &text.replace(from, to));
}

#[test]
fn check_reports_a_mac_held_twice_in_a_pool_with_the_fix() {
    let test = two_nics().file_store_only();
    // A hand edit (or a merge) gives web-02 web-01's MAC.
    edit(
        &test,
        "cluster/ipallocations/lan-10-0-0-3.yaml",
        "mac: 02:00:00:00:00:01",
        "mac: 52:54:00:00:00:02",
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    assert!(
        ran.stdout.contains("cluster/ipallocations/lan-10-0-0-2.yaml  MAC 52:54:00:00:00:02 is held by 2 allocations of pool `lan`: 10.0.0.2 (`VirtualMachine/web-01/0`), 10.0.0.3 (`VirtualMachine/web-02/0`); a MAC names one NIC per pool: give each other NIC its own with `ipamctl mac set lan ADDRESS --owner KIND/NAME --mac NEW`"),
        "{}",
        ran.stdout
    );
    assert!(
        ran.stdout.contains(
            "cluster/ipallocations/lan-10-0-0-3.yaml  MAC 52:54:00:00:00:02 is held by 2"
        )
    );
    // The fix it names clears it.
    ran.then()
        .args([
            "mac", "set", "lan", "10.0.0.3", "--owner", WEB2, "--mac", "auto",
        ])
        .run()
        .then()
        .args(["check"])
        .run();
}

/// A MAC on two allocations of a pool (left by a claim killed after an outside writer
/// deleted its record, or by a hand edit or a merge): `check --fix` keeps it on the
/// allocation its record names, even when that is not the lowest address, and removes it
/// from the other, which keeps its address; with no record, on the one created first, then
/// the lowest address, and makes its record. Then `check` is clean. Before the fix `check
/// --fix` left the error (exit 1).
#[test]
fn check_fix_keeps_a_mac_held_twice_on_the_allocation_its_record_names() {
    let test = two_nics().file_store_only();
    // web-01 (10.0.0.2) is given web-02's MAC, whose record names web-02 (10.0.0.3).
    edit(
        &test,
        "cluster/ipallocations/lan-10-0-0-2.yaml",
        "mac: \"52:54:00:00:00:02\"",
        "mac: 02:00:00:00:00:01",
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    assert!(ran.stdout.contains("is held by 2"), "{}", ran.stdout);
    let ran = ran.then().args(["check", "--fix"]).run();
    assert_eq!(ran.stdout, "");
    assert!(
        ran.stderr.contains("removed MAC 02:00:00:00:00:01 from cluster/ipallocations/lan-10-0-0-2.yaml (10.0.0.2 of `VirtualMachine/web-01/0`): cluster/ipallocations/lan-10-0-0-3.yaml keeps it (10.0.0.3 of `VirtualMachine/web-02/0`: its record names it)"),
        "{}",
        ran.stderr
    );
    let web1 = ran.read("cluster/ipallocations/lan-10-0-0-2.yaml");
    assert!(!web1.contains("mac:"), "{web1}");
    assert!(web1.contains("address: \"10.0.0.2\""), "{web1}");
    let web2 = ran.read("cluster/ipallocations/lan-10-0-0-3.yaml");
    assert!(web2.contains("mac: 02:00:00:00:00:01"), "{web2}");
    let ran = ran.then().args(["check"]).run();
    assert_eq!(ran.stdout, "");

    // Without a record: the one created first (both in one second here), then the lowest
    // address, keeps it, and its record is made.
    let test = two_nics().file_store_only();
    edit(
        &test,
        "cluster/ipallocations/lan-10-0-0-3.yaml",
        "mac: 02:00:00:00:00:01",
        "mac: \"52:54:00:00:00:02\"",
    );
    test.remove("cluster/macs/lan-525400000002");
    let ran = test.args(["check", "--fix"]).run();
    assert!(
        ran.stderr.contains("removed MAC 52:54:00:00:00:02 from cluster/ipallocations/lan-10-0-0-3.yaml (10.0.0.3 of `VirtualMachine/web-02/0`): cluster/ipallocations/lan-10-0-0-2.yaml keeps it (10.0.0.2 of `VirtualMachine/web-01/0`: it was created first)"),
        "{}",
        ran.stderr
    );
    assert_eq!(
        ran.read("cluster/macs/lan-525400000002"),
        "10.0.0.2\nVirtualMachine web-01/0 -\n"
    );
    let ran = ran.then().args(["check"]).run();
    assert_eq!(ran.stdout, "");
}

#[test]
fn check_reports_a_malformed_mac_with_the_fix() {
    let test = two_nics().file_store_only();
    edit(
        &test,
        "cluster/ipallocations/lan-10-0-0-3.yaml",
        "mac: 02:00:00:00:00:01",
        "mac: 03:00:00:00:00:01",
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    assert!(
        ran.stdout
            .contains("invalid MAC `03:00:00:00:00:01`: it is a multicast MAC")
            && ran
                .stdout
                .contains("fix spec.mac to six hex octets of a unicast MAC"),
        "{}",
        ran.stdout
    );
}

#[test]
fn check_reports_an_auto_mac_that_no_longer_fits_its_address() {
    let test = two_nics().file_store_only();
    edit(
        &test,
        "cluster/ipallocations/lan-10-0-0-2.yaml",
        "mac: \"52:54:00:00:00:02\"",
        "mac: \"52:54:00:00:00:07\"",
    );
    let ran = test.args(["check"]).status(code::FAILURE).run();
    assert!(
        ran.stdout.contains("MAC 52:54:00:00:00:07 has pool `lan`'s macPrefix 52:54:00 but is not the one `--mac auto` derives for 10.0.0.2 (52:54:00:00:00:02) nor for another address of `VirtualMachine/web-01/0`: an edited auto MAC; fix it with `ipamctl mac set lan 10.0.0.2 --owner VirtualMachine/web-01/0 --mac auto`"),
        "{}",
        ran.stdout
    );
    ran.then()
        .args([
            "mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", "auto",
        ])
        .run()
        .then()
        .args(["check"])
        .run();
}

/// 32 processes at once, four per MAC: each MAC ends on exactly one allocation of the pool,
/// and every loser was told who holds it.
#[test]
fn thirty_two_claims_sharing_eight_macs_leave_each_on_one_allocation() {
    let test = pools().file_store_only();
    let state = test.state();
    let children: Vec<_> = (0..32)
        .map(|i| {
            let owner = format!("VirtualMachine/vm-{i:02}/0");
            let mac = format!("02:00:00:00:01:{:02x}", i % 8);
            let child = Command::new(BIN)
                .args(["-d", state.to_str().unwrap(), "allocate", "lan"])
                .args(["--owner", &owner, "--mac", &mac])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn ipamctl");
            (owner, mac, child)
        })
        .collect();
    let mut won: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (owner, mac, child) in children {
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            Some(0) => won.entry(mac).or_default().push(owner),
            Some(4) => assert!(
                stderr.starts_with(&format!(
                    "error: MAC {mac} is held in pool `lan` by `VirtualMachine/vm-"
                )),
                "{owner}: {stderr}"
            ),
            other => panic!("{owner}: {other:?} {stderr}"),
        }
    }
    assert_eq!(won.len(), 8, "{won:?}");
    assert!(won.values().all(|w| w.len() == 1), "{won:?}");
    let on_disk = common::list_items(&test.clone_list());
    let macs: Vec<String> = on_disk
        .iter()
        .map(|i| i["spec"]["mac"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(macs.len(), 8, "{macs:?}");
    assert_eq!(macs.iter().collect::<BTreeSet<_>>().len(), 8);
    test.args(["check"]).run();
}

trait ListJson {
    fn clone_list(&self) -> String;
}

impl ListJson for Test {
    /// `list -o json` of the state directory, run directly.
    fn clone_list(&self) -> String {
        let out = Command::new(BIN)
            .args(["-d", self.state().to_str().unwrap(), "list", "-o", "json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap()
    }
}

/// A claim with a MAC killed at each of its steps (before its record, between its record and
/// its allocation) never leaves an allocation with the MAC and no record: the MAC's record
/// is made before the allocation (issue 46: the claim used to write its allocation first,
/// and a kill between the two let another owner be given the MAC too). Another owner's claim
/// of the MAC then takes the dead claim's record over, and the owner asking again is refused
/// the MAC, naming the holder. Needs `cargo test --features failpoints --test cli_mac`.
#[cfg(feature = "failpoints")]
#[test]
fn a_claim_with_a_mac_killed_at_any_step_never_leaves_the_mac_on_two_allocations() {
    for point in [
        "before-mac-take",
        "claim-before-mac-record",
        "claim-after-mac-record",
    ] {
        let test = pools().file_store_only();
        let state = test.state();
        let run = |args: &[&str], failpoint: Option<&str>| {
            let mut cmd = Command::new(BIN);
            cmd.args(["-d", state.to_str().unwrap()]).args(args);
            match failpoint {
                Some(p) => cmd.env("FAILPOINTS", format!("{p}=return")),
                None => cmd.env_remove("FAILPOINTS"),
            };
            cmd.output().unwrap()
        };
        let killed = run(&allocate("lan", WEB1, "02:00:00:00:00:01"), Some(point));
        assert!(!killed.status.success(), "{point}");
        let allocation = state.join("cluster/ipallocations/lan-10-0-0-2.yaml");
        assert!(
            !allocation.exists(),
            "{point}: the allocation came before its record"
        );
        let other = run(&allocate("lan", WEB2, "02:00:00:00:00:01"), None);
        assert_eq!(
            String::from_utf8_lossy(&other.stdout),
            "10.0.0.2\n",
            "{point}"
        );
        assert_eq!(
            std::fs::read_to_string(state.join("cluster/macs/lan-020000000001")).unwrap(),
            "10.0.0.2\nVirtualMachine web-02/0 -\n",
            "{point}"
        );
        let again = run(&allocate("lan", WEB1, "02:00:00:00:00:01"), None);
        assert_eq!(
            again.status.code(),
            Some(code::CONFLICT),
            "{point}: {again:?}"
        );
        assert!(
            String::from_utf8_lossy(&again.stderr)
                .contains("held in pool `lan` by `VirtualMachine/web-02/0`"),
            "{point}: {again:?}"
        );
    }
}

/// A claim of a MAC that found no record, held between that read and its record's create
/// while another owner claims the MAC whole and an outside `rm` deletes that owner's record,
/// is refused the MAC, naming the holder: the pool is read for a holder after the record is
/// made, not before (the storm of `tests/mac_race.rs` found the old order putting one MAC
/// on two allocations with `rm` of records alone). Needs
/// `cargo test --features failpoints --test cli_mac`.
#[cfg(feature = "failpoints")]
#[test]
fn a_claim_held_before_its_record_while_the_holders_record_is_removed_is_refused() {
    let test = pools().file_store_only();
    let state = test.state();
    // The held claim asks for an address of its own, so that nothing but the MAC stands
    // between the two claims.
    let command = |owner: &str, failpoint: Option<&str>| {
        let mut cmd = Command::new(BIN);
        cmd.args(["-d", state.to_str().unwrap()])
            .args(allocate("lan", owner, "02:00:00:00:00:01"));
        if failpoint.is_some() {
            cmd.args(["--address", "10.0.0.9"]);
        }
        match failpoint {
            Some(p) => cmd.env("FAILPOINTS", p),
            None => cmd.env_remove("FAILPOINTS"),
        };
        cmd
    };
    let held = command(WEB2, Some("claim-before-mac-record=sleep(3000)"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Long enough for the held claim to read that no record exists (were it not there yet,
    // it would read the holder's record below and be refused either way).
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let holder = command(WEB1, None).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&holder.stdout), "10.0.0.2\n");
    std::fs::remove_file(state.join("cluster/macs/lan-020000000001")).unwrap();
    let held = held.wait_with_output().unwrap();
    assert_eq!(held.status.code(), Some(code::CONFLICT), "{held:?}");
    assert!(
        String::from_utf8_lossy(&held.stderr)
            .contains("held in pool `lan` by `VirtualMachine/web-01/0`"),
        "{held:?}"
    );
    let with_mac: Vec<String> = std::fs::read_dir(state.join("cluster/ipallocations"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap())
        .filter(|text| text.contains("02:00:00:00:00:01"))
        .collect();
    assert_eq!(with_mac.len(), 1, "{with_mac:?}");
    // The record `rm` took is `check`'s to report and `check --fix`'s to make again.
    let checked = test.args(["check"]).run();
    assert!(
        checked.stdout.contains("has no record"),
        "{}",
        checked.stdout
    );
    let fixed = checked.then().args(["check", "--fix"]).run();
    eprintln!("{}", fixed.stdout);
    assert_eq!(
        std::fs::read_to_string(state.join("cluster/macs/lan-020000000001")).unwrap(),
        "10.0.0.2\nVirtualMachine web-01/0 -\n"
    );
}

/// `diff` shows a MAC changed in place as `mac-changed` (not a conflict), and `history` as
/// `mac changed`, with the MAC.
#[test]
fn diff_and_history_show_a_mac_change() {
    let test = two_nics().file_store_only();
    let root = test.state();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(&root)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-qm", "claims"]);
    let ran = test
        .args([
            "mac",
            "set",
            "lan",
            "10.0.0.3",
            "--owner",
            WEB2,
            "--mac",
            "02:00:00:00:00:02",
        ])
        .run()
        .then()
        .args(["diff", "HEAD", "-o", "json"])
        .status(code::FAILURE)
        .run();
    let diff: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let changes = diff["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{diff}");
    assert_eq!(changes[0]["change"], "mac-changed");
    assert_eq!(changes[0]["mac"], "02:00:00:00:00:02");
    assert_eq!(changes[0]["was"], "mac 02:00:00:00:00:01");
    assert!(diff["conflicts"].as_array().unwrap().is_empty(), "{diff}");
    git(&["add", "-A"]);
    git(&["commit", "-qm", "new NIC"]);
    let ran = ran.then().args(["history", "10.0.0.3", "-o", "json"]).run();
    let entries: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    let seen: Vec<(&str, &str)> = entries["items"]
        .as_array()
        .or(entries.as_array())
        .unwrap()
        .iter()
        .map(|e| (e["action"].as_str().unwrap(), e["mac"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [
            ("mac changed", "02:00:00:00:00:02"),
            ("claimed", "02:00:00:00:00:01")
        ]
    );
}

/// File store: an allocation whose MAC has no record (deleted from outside, a MAC written by
/// hand) is a warning; `check --fix` makes the record, and another owner is then refused the
/// MAC from the record alone. The owner asking again makes it too.
#[test]
fn check_warns_of_a_mac_without_its_record_and_fix_makes_it() {
    let test = two_nics().file_store_only();
    test.remove("cluster/macs/lan-020000000001");
    let ran = test.args(["check"]).run();
    assert!(
        ran.stdout.contains("warning   cluster/ipallocations/lan-10-0-0-3.yaml  MAC 02:00:00:00:00:01 has no record `cluster/macs/lan-020000000001` (deleted, or a MAC written by hand): each claim of the MAC by another owner reads the whole pool to find its holder; `ipamctl check --fix` makes the record"),
        "{}",
        ran.stdout
    );
    let ran = ran.then().args(["check", "--fix"]).run();
    assert_eq!(ran.stdout, "");
    assert!(
        ran.stderr.contains(
            "made the record of MAC 02:00:00:00:00:01 for cluster/ipallocations/lan-10-0-0-3.yaml"
        ),
        "{}",
        ran.stderr
    );
    assert_eq!(
        ran.read("cluster/macs/lan-020000000001"),
        "10.0.0.3\nVirtualMachine web-02/0 -\n"
    );
    ran.remove("cluster/macs/lan-020000000001");
    let ran = ran
        .then()
        .args(allocate("lan", WEB2, "02:00:00:00:00:01"))
        .stdout("10.0.0.3\n")
        .run()
        .then()
        .args(["check"])
        .run();
    assert_eq!(ran.stdout, "");
}

/// A symlink (to a file outside the state) or a FIFO planted at a MAC's record path fails the
/// claim with one `error:` line, writes nothing outside the root, never blocks on the FIFO,
/// and leaves no allocation behind (before the fix, the claim's file stayed: exit 1 with an
/// address held).
#[test]
fn a_symlink_or_fifo_at_a_mac_record_fails_the_claim_and_leaves_nothing() {
    let test = pools().file_store_only();
    let outside = tempfile::tempdir().expect("a directory outside the state");
    let victim = outside.path().join("victim");
    std::fs::create_dir_all(test.path("cluster/macs")).expect("the records' directory");
    std::os::unix::fs::symlink(&victim, test.path("cluster/macs/lan-020000aa0001"))
        .expect("plant a symlink");
    let status = Command::new("mkfifo")
        .arg(test.path("cluster/macs/plain-020000aa0002"))
        .status()
        .expect("mkfifo");
    assert!(status.success());
    let ran = test
        .args(allocate("lan", WEB1, "02:00:00:aa:00:01"))
        .status(code::FAILURE)
        .run();
    assert!(ran.stderr.contains("is a symlink"), "{}", ran.stderr);
    let ran = ran
        .then()
        .args(allocate("plain", WEB2, "02:00:00:aa:00:02"))
        .status(code::FAILURE)
        .run();
    assert!(ran.stderr.contains("is a FIFO"), "{}", ran.stderr);
    assert!(!victim.exists(), "nothing written outside the state");
    ran.then().args(["list", "-o", "name"]).stdout("").run();
}

/// A claim, or a `mac set`, of a MAC another NIC of the pool holds is refused before it
/// writes anything: a kill right after its MAC's record is judged (the first write of one
/// that is not refused) is never reached. (It used to write its file with the held MAC
/// first and undo it after: a kill between left the MAC on two allocations, two DHCP
/// reservations for one NIC.) Needs `--features failpoints`.
#[cfg(feature = "failpoints")]
#[test]
fn a_claim_or_mac_set_of_a_held_mac_killed_midway_leaves_it_on_one_allocation() {
    let test = two_nics().file_store_only();
    let state = test.state();
    let held = "02:00:00:00:00:01"; // web-02's, at 10.0.0.3
    let run = |args: &[&str]| {
        Command::new(BIN)
            .args(["-d", state.to_str().unwrap()])
            .args(args)
            .env(
                "FAILPOINTS",
                "claim-after-mac-record=return;mac-set-after-record=return",
            )
            .output()
            .unwrap()
    };
    let holders = || {
        let out = Command::new(BIN)
            .args([
                "-d",
                state.to_str().unwrap(),
                "list",
                "--mac",
                held,
                "-o",
                "name",
            ])
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let web3 = "VirtualMachine/web-03/0";
    for args in [
        allocate("lan", web3, held),
        vec![
            "mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", held,
        ],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(code::CONFLICT), "{args:?}: {out:?}");
        assert_eq!(holders(), "ipallocation/lan-10-0-0-3\n", "{args:?}");
    }
}

/// `mac set` guarded by the holder's name with another uid is refused, and the message
/// says the uids differ (it read "held by `X`, not `X`").
#[test]
fn mac_set_with_the_holders_name_but_another_uid_names_the_uids() {
    let test = two_nics().file_store_only();
    let ran = test
        .args(["mac", "set", "lan", "10.0.0.3", "--owner", WEB2])
        .args(["--uid", "00000000-0000-4000-8000-000000000001"])
        .args(["--mac", "02:00:00:00:00:09"])
        .fails(code::CONFLICT)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains("(no uid)")
            && ran
                .stderr
                .contains("(uid 00000000-0000-4000-8000-000000000001)"),
        "{}",
        ran.stderr
    );
}

/// Issue 44, item 7: `list --host-name NAME` finds a NIC by the name DHCP and DNS give it
/// (any case), in every pool it holds an address in; both owners that derive one name (the
/// clash the exports refuse) are listed; a name that is no label is exit 2.
#[test]
fn list_by_host_name_finds_the_nics_addresses_in_every_pool() {
    let mut t = pools();
    for (pool, owner) in [
        ("lan", WEB1),
        ("lan6", WEB1),
        ("lan", "VirtualMachine/web-01/2"),
        ("plain", "Node/web-01-2"),
        ("plain", "FloatingIP/web-01"),
    ] {
        t = t.args(["allocate", pool, "--owner", owner]).run().then();
    }
    let owners = |ran: &common::Ran| -> Vec<String> {
        list_items(&ran.stdout)
            .iter()
            .map(|a| {
                let spec = &a["spec"];
                format!(
                    "{} {} {}/{}",
                    spec["pool"].as_str().unwrap_or("?"),
                    spec["address"].as_str().unwrap_or("?"),
                    spec["owner"]["kind"].as_str().unwrap_or("?"),
                    spec["owner"]["name"].as_str().unwrap_or("?"),
                )
            })
            .collect()
    };
    let ran = t
        .args(["list", "--host-name", "WEB-01", "-o", "json"])
        .run();
    assert_eq!(
        owners(&ran),
        [
            "lan 10.0.0.2 VirtualMachine/web-01/0",
            "lan6 2001:db8:6::1 VirtualMachine/web-01/0"
        ],
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["list", "--host-name", "web-01-2", "-o", "json"])
        .run();
    assert_eq!(
        owners(&ran),
        [
            "lan 10.0.0.3 VirtualMachine/web-01/2",
            "plain 10.9.0.1 Node/web-01-2"
        ],
        "{}",
        ran.stdout
    );
    let ran = ran
        .then()
        .args(["list", "--host-name", "db"])
        .stderr("No allocations found.\n")
        .run();
    ran.then()
        .args(["list", "--host-name", "web_01"])
        .fails(code::INVALID)
        .run();
}
