//! The state the host-tier tests export, made by the real binary: pools with and without a
//! stored subnet, IPv4 and IPv6, NICs with MACs (written as `spec.mac` lines, as a hand or
//! `allocate --mac` would), a NIC without one and a floating IP; on the file store, or
//! imported into a fresh PostgreSQL database.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod netns;
#[path = "../pg/mod.rs"]
pub mod pg;

pub const BIN: &str = env!("CARGO_BIN_EXE_ipamctl");

pub const POOLS: &str = "\
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: lab}
spec: {cidr: 192.0.2.0/24, kind: public, gateway: 192.0.2.1}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: lab-v6}
spec: {cidr: '2001:db8:1::/64', kind: public}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: edge}
spec: {cidr: 203.0.113.0/24, kind: public}
---
apiVersion: pivirt.hu/v1
kind: Subnet
metadata: {name: web}
spec: {pool: edge, cidr: 203.0.113.0/25, gateway: 203.0.113.1}
";

/// A state directory in a temporary directory.
pub struct Lab {
    pub tmp: tempfile::TempDir,
    db: Option<pg::Db>,
}

impl Lab {
    /// The pools above, and: `VirtualMachine web-01/0` at 192.0.2.2 and 2001:db8:1::1 with
    /// MAC :01, `web-01/1` at 192.0.2.3 with :02, `Node hv-1` at 203.0.113.2 (subnet
    /// `web`) with :03, `VirtualMachine db/0` at 192.0.2.4 without a MAC, `FloatingIP fip`
    /// at 192.0.2.5.
    pub fn new() -> Lab {
        let lab = Lab {
            tmp: tempfile::tempdir().expect("a temporary directory"),
            db: None,
        };
        lab.ok(&["init", lab.state().to_str().expect("UTF-8")]);
        let pools = lab.tmp.path().join("pools.yaml");
        std::fs::write(&pools, POOLS).expect("write pools.yaml");
        lab.ok(&["apply", "-f", pools.to_str().expect("UTF-8")]);
        lab.nic("lab", "VirtualMachine/web-01/0", Some("52:54:00:00:00:01"));
        lab.nic(
            "lab-v6",
            "VirtualMachine/web-01/0",
            Some("52:54:00:00:00:01"),
        );
        lab.nic("lab", "VirtualMachine/web-01/1", Some("52:54:00:00:00:02"));
        lab.nic("edge", "Node/hv-1", Some("52:54:00:00:00:03"));
        lab.nic("lab", "VirtualMachine/db/0", None);
        lab.nic("lab", "FloatingIP/fip", None);
        lab
    }

    pub fn state(&self) -> PathBuf {
        self.tmp.path().join("state")
    }

    /// Allocates for `owner` in `pool` (the subnet `web` in `edge`), and writes `mac` into
    /// the allocation's manifest. Returns the address.
    pub fn nic(&self, pool: &str, owner: &str, mac: Option<&str>) -> String {
        let mut args = vec!["allocate", pool, "--owner", owner];
        if pool == "edge" {
            args.extend(["--subnet", "web"]);
        }
        let out = self.ok(&args);
        let address = String::from_utf8(out.stdout)
            .expect("UTF-8")
            .trim()
            .to_owned();
        if let Some(mac) = mac {
            let name = format!("{pool}-{}", suffix(&address));
            let path = self
                .state()
                .join("cluster/ipallocations")
                .join(format!("{name}.yaml"));
            let mut text = std::fs::read_to_string(&path).expect("read the allocation");
            text.push_str(&format!("  mac: '{mac}'\n"));
            std::fs::write(&path, text).expect("write the MAC");
        }
        address
    }

    /// Applies more manifests.
    pub fn apply(&self, yaml: &str) {
        let file = self.tmp.path().join("more.yaml");
        std::fs::write(&file, yaml).expect("write the manifests");
        self.ok(&["apply", "-f", file.to_str().expect("UTF-8")]);
    }

    /// From now on, commands run on a fresh database holding this state.
    pub fn into_database(mut self) -> Lab {
        let db = pg::Db::new();
        let out = db.run(["import", self.state().to_str().expect("UTF-8")]);
        assert!(out.status.success(), "import: {}", pg::stderr(&out));
        self.db = Some(db);
        self
    }

    /// The database, after [`Lab::into_database`].
    pub fn database(&self) -> Option<&pg::Db> {
        self.db.as_ref()
    }

    /// `ipamctl` on the state directory (`-d`), or on the database.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = match &self.db {
            Some(db) => db.cmd(args),
            None => {
                let mut c = Command::new(BIN);
                c.arg("-d").arg(self.state()).args(args);
                c.env_remove("IPAMCTL_STORE")
                    .env_remove("IPAMCTL_STATE_DIR");
                c
            }
        };
        cmd.current_dir(self.tmp.path());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run ipamctl")
    }

    /// Runs and asserts exit 0.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> Output {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "ipamctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The stdout of a command that succeeds.
    #[track_caller]
    pub fn stdout(&self, args: &[&str]) -> String {
        String::from_utf8(self.ok(args).stdout).expect("UTF-8")
    }

    /// Every manifest of the state directory with its bytes, by path (not the dot-files:
    /// the store's own caches and locks): equal before and after a command means it changed
    /// nothing a reviewer would see.
    pub fn state_files(&self) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
        fn walk(dir: &Path, out: &mut std::collections::BTreeMap<PathBuf, Vec<u8>>) {
            for entry in std::fs::read_dir(dir).expect("read a state directory") {
                let path = entry.expect("a directory entry").path();
                if path
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
                {
                    continue;
                }
                if path.is_dir() {
                    walk(&path, out);
                } else {
                    out.insert(
                        path.clone(),
                        std::fs::read(&path).expect("read a state file"),
                    );
                }
            }
        }
        let mut files = std::collections::BTreeMap::new();
        walk(&self.state(), &mut files);
        files
    }

    /// Writes `text` to a file in the temporary directory; returns its path.
    pub fn file(&self, name: &str, text: &str) -> PathBuf {
        let path = self.tmp.path().join(name);
        std::fs::write(&path, text).expect("write a file");
        path
    }

    /// `dhcp export --format FORMAT --pool POOL --interface INTERFACE` (the server's end of
    /// a [`netns::Net`]), written to `FORMAT.conf` in the lab's directory: its path.
    pub fn export(&self, format: &str, pool: &str, interface: &str) -> PathBuf {
        let text = self.stdout(&[
            "dhcp",
            "export",
            "--format",
            format,
            "--pool",
            pool,
            "--interface",
            interface,
        ]);
        self.file(&format!("{format}.conf"), &text)
    }
}

/// The allocation-name suffix of an address (`192-0-2-2`, or eight 4-digit groups).
fn suffix(address: &str) -> String {
    match address.parse::<std::net::IpAddr>().expect("an address") {
        std::net::IpAddr::V4(a) => a.octets().map(|o| o.to_string()).join("-"),
        std::net::IpAddr::V6(a) => a.segments().map(|s| format!("{s:04x}")).join("-"),
    }
}

/// The (prefix, id) of every `subnet4` of a Kea4 export, in its order.
pub fn kea4_ids(kea4: &str) -> Vec<(String, u64)> {
    let v: serde_json::Value = serde_json::from_str(kea4).expect("JSON");
    v["Dhcp4"]["subnet4"]
        .as_array()
        .expect("subnet4")
        .iter()
        .map(|s| {
            (
                s["subnet"].as_str().expect("a prefix").to_owned(),
                s["id"].as_u64().expect("an id"),
            )
        })
        .collect()
}

/// Runs a validator; panics with its output unless it exits 0.
#[track_caller]
pub fn validates(program: &str, args: &[&Path]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} refused it:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
