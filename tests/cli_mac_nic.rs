//! A NIC's MAC changes in one command (issue 46, finding 5): `mac set` gives the NIC holding
//! POOL ADDRESS the new MAC on every allocation it holds in the scope (a dual-stack NIC's
//! IPv4 and IPv6), all or nothing; `--owner`/`--uid` guard it as a filter, as `release`'s do.
//! A NIC whose allocations carry different MACs (a hand edit, or a `mac set` killed between
//! its pools on the file store) is an error of `check`, with the command that finishes it,
//! and the dnsmasq export refuses it rather than write two `dhcp-host` lines for one host.
//! Under `IPAMCTL_TEST_STORE=postgres` every command but the file-store-only ones runs on
//! PostgreSQL with the same assertions (`.ci/run`).

mod common;

use common::{Test, code, list_items, pg};

/// `lan` (10.0.0.0/24, gateway .1, macPrefix 52:54:00) and `lan6` (2001:db8:6::/64), public.
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
";

const WEB1: &str = "VirtualMachine/web-01/0";
const WEB2: &str = "VirtualMachine/web-02/0";
const UID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";
const OTHER: &str = "6b3a1c9e-0d4f-4c1b-9f0e-2a7d5c8e1f30";
const OLD: &str = "02:00:00:00:00:aa";
const NEW: &str = "02:00:00:00:00:bb";

const V4_FILE: &str = "cluster/ipallocations/lan-10-0-0-2.yaml";
const V6_FILE: &str = "cluster/ipallocations/lan6-2001-0db8-0006-0000-0000-0000-0000-0001.yaml";

/// web-01 (with `UID`) dual stack with MAC `OLD`: 10.0.0.2 and 2001:db8:6::1.
fn dual_stack_nic() -> Test {
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(POOLS)
        .run()
        .then()
        .args(["allocate", "lan", "lan6", "--owner", WEB1, "--uid", UID])
        .args(["--mac", OLD])
        .stdout("10.0.0.2\n2001:db8:6::1\n")
        .run()
        .then()
}

/// Each allocation's (address, MAC), by `list -o json`.
fn macs(test: Test) -> (Vec<(String, String)>, Test) {
    let ran = test.args(["list", "-o", "json"]).run();
    let got = list_items(&ran.stdout)
        .iter()
        .map(|i| {
            (
                i["spec"]["address"].as_str().unwrap().to_owned(),
                i["spec"]["mac"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect();
    (got, ran.then())
}

/// The `dhcp-host` lines of the dnsmasq export.
fn dhcp_hosts(test: Test) -> (Vec<String>, Test) {
    let ran = test.args(["dhcp", "export", "--format", "dnsmasq"]).run();
    let lines = ran
        .stdout
        .lines()
        .filter(|l| l.starts_with("dhcp-host="))
        .map(str::to_owned)
        .collect();
    (lines, ran.then())
}

#[test]
fn mac_set_gives_a_dual_stack_nic_the_mac_in_every_pool() {
    // Named by its IPv6 address, guarded by its name alone (as `release` would be).
    let test = dual_stack_nic()
        .args(["mac", "set", "lan6", "2001:db8:6::1", "--owner", WEB1])
        .args(["--mac", NEW])
        .stdout(
            "ipallocation/lan6-2001-0db8-0006-0000-0000-0000-0000-0001 configured\n\
             ipallocation/lan-10-0-0-2 configured\n",
        )
        .run()
        .then();
    let (got, test) = macs(test);
    assert_eq!(
        got,
        [
            ("10.0.0.2".to_owned(), NEW.to_owned()),
            ("2001:db8:6::1".to_owned(), NEW.to_owned())
        ]
    );
    let (hosts, test) = dhcp_hosts(test);
    assert_eq!(
        hosts,
        [format!("dhcp-host={NEW},10.0.0.2,[2001:db8:6::1],web-01")]
    );
    // Again: nothing to do. `auto` derives the MAC from ADDRESS, for the whole NIC.
    test.args([
        "mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--uid", UID,
    ])
    .args(["--mac", NEW])
    .stdout(
        "ipallocation/lan-10-0-0-2 unchanged\n\
             ipallocation/lan6-2001-0db8-0006-0000-0000-0000-0000-0001 unchanged\n",
    )
    .unchanged()
    .run()
    .then()
    .args([
        "mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", "auto",
    ])
    .run()
    .then()
    .args(["list", "--mac", "52:54:00:00:00:02", "-o", "name"])
    .stdout(
        "ipallocation/lan-10-0-0-2\n\
             ipallocation/lan6-2001-0db8-0006-0000-0000-0000-0000-0001\n",
    )
    .run()
    .then()
    .args(["check"])
    .run();
}

/// The new MAC is held in the second pool by another NIC: the first pool's change is undone,
/// and the refusal names the holder.
#[test]
fn mac_set_changes_every_pool_or_none() {
    let test = dual_stack_nic()
        .args(["allocate", "lan6", "--owner", WEB2, "--mac", NEW])
        .stdout("2001:db8:6::2\n")
        .run()
        .then();
    let before = [test.read(V4_FILE), test.read(V6_FILE)];
    let ran = test
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", NEW])
        .status(code::CONFLICT)
        .stdout("")
        .stderr(&format!(
            "error: MAC {NEW} is held in pool `lan6` by `{WEB2}` (2001:db8:6::2); a MAC names one NIC per pool\n"
        ))
        .run();
    assert_eq!([ran.read(V4_FILE), ran.read(V6_FILE)], before);
    ran.then().args(["check"]).run();
}

/// `--owner` and `--uid` are a filter, as in `release`: the name alone passes; a uid that is
/// not the holder's is refused, naming both.
#[test]
fn mac_set_guards_by_owner_as_release_does() {
    dual_stack_nic()
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--uid", OTHER])
        .args(["--mac", NEW])
        .fails(code::CONFLICT)
        .stderr(&format!(
            "error: 10.0.0.2 in pool `lan` is held by `{WEB1}` (uid {UID}), not `{WEB1}` (uid {OTHER}); its MAC is left as it is\n"
        ))
        .run()
        .then()
        .args(["mac", "set", "lan", "10.0.0.2", "--owner", WEB2, "--mac", NEW])
        .fails(code::CONFLICT)
        .run()
        .then()
        .args(["release", "lan", "10.0.0.2", "--owner", WEB1, "--uid", OTHER])
        .fails(code::CONFLICT)
        .run();
}

/// A NIC with two MACs (here a hand edit; a `mac set` killed between its pools leaves the
/// same): `check` names both files and the command that finishes it, which works; the
/// dnsmasq export refuses to write two hosts for it.
#[test]
fn check_and_the_dnsmasq_export_refuse_a_nic_with_two_macs() {
    let test = dual_stack_nic().file_store_only();
    let text = test.read(V6_FILE);
    test.write(V6_FILE, &text.replace(OLD, NEW));
    let ran = test.args(["check"]).status(code::FAILURE).run();
    let message = format!(
        "NIC `{WEB1}` (uid {UID}) carries 2 MACs in its scope: {OLD} on 10.0.0.2 (pool `lan`, {V4_FILE}), {NEW} on 2001:db8:6::1 (pool `lan6`, {V6_FILE}); a NIC has one MAC (a `mac set` interrupted between pools leaves this): give it one with `ipamctl mac set lan 10.0.0.2 --owner {WEB1} --uid {UID} --mac {OLD}`"
    );
    for file in [V4_FILE, V6_FILE] {
        assert!(
            ran.stdout
                .lines()
                .any(|l| l.starts_with(&format!("error     {file} ")) && l.ends_with(&message)),
            "{}",
            ran.stdout
        );
    }
    let ran = ran
        .then()
        .args(["dhcp", "export", "--format", "dnsmasq"])
        .fails(code::CONFLICT)
        .run();
    assert!(
        ran.stderr.contains(&format!(
            "NIC `{WEB1}` (uid {UID}) carries MAC {OLD} on 10.0.0.2 (allocation `lan-10-0-0-2`) and MAC {NEW} on 2001:db8:6::1"
        )) && ran.stderr.contains(&format!(
            "hint: give it one MAC: ipamctl mac set lan 10.0.0.2 --owner {WEB1} --uid {UID} --mac {OLD}"
        )),
        "{}",
        ran.stderr
    );
    let test = ran
        .then()
        .args([
            "mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--uid", UID,
        ])
        .args(["--mac", OLD])
        .run()
        .then()
        .args(["check"])
        .run()
        .then();
    let (hosts, _) = dhcp_hosts(test);
    assert_eq!(hosts.len(), 1, "{hosts:?}");
}

/// `check --store` reports the same NIC on PostgreSQL (two manifests changed by hand).
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn check_on_postgres_reports_a_nic_with_two_macs() {
    let db = pg::Db::new();
    let dir = tempfile::tempdir().unwrap();
    db.apply(dir.path(), POOLS);
    let out = db.run(["allocate", "lan", "lan6", "--owner", WEB1, "--mac", OLD]);
    assert!(out.status.success(), "{}", pg::stderr(&out));
    db.sql()
        .batch_execute(&format!(
            "UPDATE ipamctl.allocations
             SET manifest = convert_to(replace(convert_from(manifest, 'UTF8'), '{OLD}', '{NEW}'), 'UTF8')
             WHERE pool = 'lan6'"
        ))
        .unwrap();
    let out = db.run(["check"]);
    assert_eq!(
        out.status.code(),
        Some(code::FAILURE),
        "{}",
        pg::stdout(&out)
    );
    assert!(
        pg::stdout(&out).contains(&format!(
            "NIC `{WEB1}` (no uid) carries 2 MACs in its scope"
        )),
        "{}",
        pg::stdout(&out)
    );
}

/// A `mac set` killed between its two pools: on the file store the NIC is left with two
/// MACs, which `check` reports and the same command, run again, finishes; on PostgreSQL
/// its transaction never committed, and the NIC keeps its old MAC everywhere.
#[cfg(feature = "failpoints")]
#[test]
fn a_mac_set_killed_between_pools_is_reported_and_finished_by_running_it_again() {
    use common::BIN;
    use std::process::Command;
    let on_db = common::on_postgres();
    let test = dual_stack_nic();
    let db = on_db.then(|| {
        let db = pg::Db::new();
        let out = db.run(["import", test.state().to_str().unwrap()]);
        assert!(out.status.success(), "{}", pg::stderr(&out));
        db
    });
    let state = test.state();
    let run = |failpoint: Option<&str>, args: &[&str]| {
        let mut cmd = match &db {
            Some(db) => db.cmd(args),
            None => {
                let mut cmd = Command::new(BIN);
                cmd.args(["-d", state.to_str().unwrap()]).args(args);
                cmd
            }
        };
        cmd.env_remove("FAILPOINTS");
        if let Some(f) = failpoint {
            cmd.env("FAILPOINTS", f);
        }
        cmd.output().unwrap()
    };
    let set = [
        "mac", "set", "lan", "10.0.0.2", "--owner", WEB1, "--mac", NEW,
    ];
    let killed = run(Some("mac-set-between-pools=return"), &set);
    assert_eq!(killed.status.code(), None, "killed: {killed:?}");
    let check = run(None, &["check"]);
    let listed = pg::stdout(&run(None, &["list", "--mac", OLD, "-o", "name"]));
    if on_db {
        assert!(check.status.success(), "{}", pg::stdout(&check));
        assert_eq!(listed.lines().count(), 2, "{listed}");
    } else {
        assert_eq!(check.status.code(), Some(code::FAILURE));
        assert!(
            pg::stdout(&check).contains("carries 2 MACs in its scope"),
            "{}",
            pg::stdout(&check)
        );
        assert_eq!(listed.lines().count(), 1, "{listed}");
        let export = run(None, &["dhcp", "export", "--format", "dnsmasq"]);
        assert_eq!(export.status.code(), Some(code::CONFLICT));
    }
    let again = run(None, &set);
    assert!(again.status.success(), "{}", pg::stderr(&again));
    let check = run(None, &["check"]);
    assert!(check.status.success(), "{}", pg::stdout(&check));
    let listed = pg::stdout(&run(None, &["list", "--mac", NEW, "-o", "name"]));
    assert_eq!(listed.lines().count(), 2, "{listed}");
}
