//! `dhcp export` gives what a server accepts, or refuses: over two tenants whose VPCs share a
//! range (the normal case), every format is refused naming both namespaces and the ranges,
//! and each namespace alone passes its server's validator (`kea-dhcp4 -t`, `kea-dhcp6 -t`,
//! `dnsmasq --test`); a host name that dnsmasq would read as a keyword of `dhcp-host` is
//! written so that it reads as a name.

mod host;

use std::path::Path;

use host::{Lab, validates};

/// The lab, plus tenants `acme` and `globex` with one VPC each over the same ranges
/// (10.50.0.0/16 and fd50::/48), a subnet `web` (10.50.1.0/24) in each, and a dual-stack NIC
/// with its own MAC and host name in each.
fn tenants() -> Lab {
    let lab = Lab::new();
    for (ns, mac, vm) in [
        ("acme", "52:54:00:00:50:01", "a-web"),
        ("globex", "52:54:00:00:50:02", "g-web"),
    ] {
        lab.ok(&[
            "-n",
            ns,
            "vpc",
            "create",
            "net",
            "--cidr",
            "10.50.0.0/16",
            "--cidr",
            "fd50::/48",
        ]);
        lab.ok(&[
            "-n",
            ns,
            "subnet",
            "create",
            "--pool",
            "vpc-net",
            "--cidr",
            "10.50.1.0/24",
            "web",
        ]);
        let owner = format!("VirtualMachine/{vm}/0");
        lab.ok(&[
            "-n", ns, "allocate", "vpc-net", "--subnet", "web", "--owner", &owner, "--mac", mac,
        ]);
        lab.ok(&[
            "-n",
            ns,
            "allocate",
            "vpc-net-v6",
            "--owner",
            &owner,
            "--mac",
            mac,
        ]);
    }
    lab
}

const FORMATS: [&str; 3] = ["kea4", "kea6", "dnsmasq"];

/// Runs the validator of `format` on `file`.
fn validate(format: &str, file: &Path) {
    match format {
        "kea4" => validates("kea-dhcp4", &[Path::new("-t"), file]),
        "kea6" => validates("kea-dhcp6", &[Path::new("-t"), file]),
        _ => validates("dnsmasq", &[Path::new("--test"), Path::new("-C"), file]),
    }
}

#[test]
#[cfg_attr(
    any(not(has_kea), not(has_dnsmasq)),
    ignore = "needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs dnsmasq: apt-get install dnsmasq-base"
)]
fn overlapping_tenants_are_refused_whole_and_accepted_per_namespace() {
    let lab = tenants();
    let before = lab.state_files();
    for format in FORMATS {
        let out = lab.run(&["dhcp", "export", "--format", format]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(4), "{format}: {err}");
        assert!(out.stdout.is_empty(), "{format}: nothing half-written");
        assert_eq!(
            err.lines().filter(|l| l.starts_with("error:")).count(),
            1,
            "{err}"
        );
        let (v4, v6) = ("10.50.1.0/24", "fd50::/48");
        let range = if format == "kea6" { v6 } else { v4 };
        assert!(
            err.contains("namespace `acme`")
                && err.contains("namespace `globex`")
                && err.matches(range).count() == 2,
            "{format}: names both tenants and both ranges: {err}"
        );
        assert!(
            err.contains("-n NS") && err.contains("--pool"),
            "{format}: says how to export what a server accepts: {err}"
        );
        for ns in ["acme", "globex"] {
            let text = lab.stdout(&["-n", ns, "dhcp", "export", "--format", format]);
            validate(format, &lab.file(&format!("{ns}.{format}"), &text));
        }
    }
    assert!(lab.state_files() == before, "state untouched");
}

#[test]
#[cfg_attr(
    any(not(has_kea), not(has_dnsmasq), not(has_postgres)),
    ignore = "needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs dnsmasq: apt-get install dnsmasq-base; needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn overlapping_tenants_are_refused_on_postgres_too() {
    let lab = tenants().into_database();
    for format in FORMATS {
        let out = lab.run(&["dhcp", "export", "--format", format]);
        assert_eq!(
            out.status.code(),
            Some(4),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = lab.stdout(&["-n", "acme", "dhcp", "export", "--format", format]);
        validate(format, &lab.file(&format!("acme.{format}"), &text));
    }
}
