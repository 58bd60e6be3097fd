//! End to end, a guest gets its address: two network namespaces joined by a veth pair, a
//! DHCP server (dnsmasq, then Kea) serving `ipamctl dhcp export` on one side, busybox's
//! `udhcpc` on the other with a NIC's MAC on its end. It gets exactly the allocated address,
//! the subnet's gateway as its router and its host name; a MAC without a reservation gets no
//! address. Only TEST-NET addresses, only namespaces this test made (removed however it
//! ends, with every process it started), every wait bounded.

mod host;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use host::Lab;

/// The namespaces, veth and processes of one run; `Drop` removes them all.
struct Net {
    server: String,
    client: String,
    children: Vec<Child>,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Net {
    /// `S` holds the server's end with 192.0.2.250/24; `C` the client's end, down.
    fn new(tag: &str) -> Net {
        let id = format!("{}{tag}", std::process::id() % 100_000);
        let net = Net {
            server: format!("ipamctl-s{id}"),
            client: format!("ipamctl-c{id}"),
            children: Vec::new(),
        };
        let (vs, vc) = (format!("vs{id}"), format!("vc{id}"));
        ip(&["netns", "add", &net.server]);
        ip(&["netns", "add", &net.client]);
        ip(&["link", "add", &vs, "type", "veth", "peer", "name", &vc]);
        ip(&["link", "set", &vs, "netns", &net.server]);
        ip(&["link", "set", &vc, "netns", &net.client]);
        net.exec_ok(&net.server, &["ip", "link", "set", "lo", "up"]);
        net.exec_ok(
            &net.server,
            &["ip", "addr", "add", "192.0.2.250/24", "dev", &vs],
        );
        net.exec_ok(&net.server, &["ip", "link", "set", &vs, "up"]);
        net.exec_ok(&net.client, &["ip", "link", "set", "lo", "up"]);
        // Both ends up, and the server's end running (carrier), before any server starts:
        // Kea opens its sockets once, at start, and skips an interface that is not running
        // (`DHCPSRV_OPEN_SOCKET_FAIL … is not running`: no lease, 1 CI run in many).
        net.exec_ok(&net.client, &["ip", "link", "set", &vc, "up"]);
        net.wait_running(&net.server.clone(), &vs);
        net
    }

    /// Waits (at most 5 s) until `dev` in namespace `ns` has a carrier (`LOWER_UP`).
    fn wait_running(&self, ns: &str, dev: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let out = self
                .exec(ns, &["ip", "link", "show", "dev", dev])
                .output()
                .expect("run ip link show");
            let shown = String::from_utf8_lossy(&out.stdout).into_owned();
            if shown.contains("LOWER_UP") {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{dev} has no carrier after 5 s: {shown}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn server_if(&self) -> String {
        format!("vs{}", &self.server["ipamctl-s".len()..])
    }

    fn client_if(&self) -> String {
        format!("vc{}", &self.client["ipamctl-c".len()..])
    }

    fn exec(&self, ns: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns]).args(args);
        cmd
    }

    fn exec_ok(&self, ns: &str, args: &[&str]) {
        let out = self.exec(ns, args).output().expect("run ip netns exec");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts a server in the server's namespace; it is killed when the test ends.
    fn serve(&mut self, args: &[&str], env: &[(&str, &Path)], log: &Path) {
        let mut cmd = self.exec(&self.server.clone(), args);
        let log = std::fs::File::create(log).expect("create the server's log");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log)
            .spawn()
            .expect("start the DHCP server");
        self.children.push(child);
    }

    fn stop_servers(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Runs udhcpc on the client's end with `mac`: what its script saw on `bound`, or
    /// `None` when it got no lease. At most about 12 seconds (6 tries, 1 s apart, then
    /// `timeout`'s bound).
    fn ask(&self, mac: &str, dir: &Path) -> Option<String> {
        let vc = self.client_if();
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "down"]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "address", mac]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "up"]);
        let seen = dir.join(format!("bound-{}", mac.replace(':', "")));
        let script = dir.join("udhcpc.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n[ \"$1\" = bound ] && echo \"ip=$ip mask=$mask router=$router hostname=$hostname\" > {}\nexit 0\n",
                seen.display()
            ),
        )
        .expect("write the udhcpc script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("make the script executable");
        let _ = std::fs::remove_file(&seen);
        let script = script.to_str().expect("UTF-8");
        let out = self
            .exec(
                &self.client,
                &[
                    "timeout", "20", "busybox", "udhcpc", "-f", "-q", "-n", "-t", "6", "-T", "1",
                    "-i", &vc, "-s", script,
                ],
            )
            .output()
            .expect("run udhcpc");
        match std::fs::read_to_string(&seen) {
            Ok(text) => {
                assert!(
                    out.status.success(),
                    "udhcpc: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                Some(text.trim().to_owned())
            }
            Err(_) => None,
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.stop_servers();
        // Deleting a namespace deletes the veth end in it, and so the pair.
        for ns in [&self.server, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn lab_with_export(format: &str) -> (Lab, PathBuf) {
    let lab = Lab::new();
    let text = lab.stdout(&["dhcp", "export", "--format", format, "--pool", "lab"]);
    let path = lab.file(&format!("{format}.conf"), &text);
    (lab, path)
}

const WEB01: &str = "ip=192.0.2.2 mask=24 router=192.0.2.1 hostname=web-01";
const WEB01_1: &str = "ip=192.0.2.3 mask=24 router=192.0.2.1 hostname=web-01-1";

#[test]
// One `ignore` naming every missing tool (a second `cfg_attr(ignore)` would be unused).
#[cfg_attr(
    any(not(has_root), not(has_dnsmasq), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs dnsmasq: apt-get install dnsmasq-base; needs busybox's udhcpc: apt-get install busybox"
)]
fn dnsmasq_serving_the_export_gives_a_guest_its_address_router_and_name() {
    let (lab, conf) = lab_with_export("dnsmasq");
    let dir = lab.tmp.path();
    let mut net = Net::new("d");
    let vs = net.server_if();
    let leases = dir.join("dnsmasq.leases");
    let pid = dir.join("dnsmasq.pid");
    net.serve(
        &[
            "dnsmasq",
            "--keep-in-foreground",
            &format!("--conf-file={}", conf.display()),
            "--port=0",
            "--no-resolv",
            "--no-hosts",
            "--bind-interfaces",
            &format!("--interface={vs}"),
            "--except-interface=lo",
            "--user=root",
            &format!("--dhcp-leasefile={}", leases.display()),
            &format!("--pid-file={}", pid.display()),
        ],
        &[],
        &dir.join("server.log"),
    );
    let log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    assert_eq!(
        net.ask("52:54:00:00:00:01", dir).as_deref(),
        Some(WEB01),
        "{}",
        log()
    );
    assert_eq!(
        net.ask("52:54:00:00:00:02", dir).as_deref(),
        Some(WEB01_1),
        "{}",
        log()
    );
    let none = net.ask("52:54:00:00:00:99", dir);
    assert_eq!(none, None, "a MAC without a reservation: {}", log());
}

#[test]
#[cfg_attr(
    any(not(has_root), not(has_kea), not(has_udhcpc)),
    ignore = "needs root: network namespaces (run as root, or in CI); needs Kea: apt-get install kea-dhcp4-server kea-dhcp6-server; needs busybox's udhcpc: apt-get install busybox"
)]
fn kea_serving_the_export_gives_a_guest_its_address_router_and_name() {
    let (lab, conf) = lab_with_export("kea4");
    let dir = lab.tmp.path();
    let mut net = Net::new("k");
    // The export as it is, but for what a test server needs: its own interface and a lease
    // file in the temporary directory.
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&conf).unwrap()).unwrap();
    config["Dhcp4"]["interfaces-config"]["interfaces"] = serde_json::json!([net.server_if()]);
    config["Dhcp4"]["lease-database"] = serde_json::json!({
        "type": "memfile", "persist": true,
        "name": dir.join("kea-leases4.csv").to_str().unwrap(),
    });
    let conf = lab.file("kea4-test.json", &config.to_string());
    net.serve(
        &["kea-dhcp4", "-c", conf.to_str().unwrap()],
        &[("KEA_LOCKFILE_DIR", dir), ("KEA_PIDFILE_DIR", dir)],
        &dir.join("server.log"),
    );
    let log = || std::fs::read_to_string(dir.join("server.log")).unwrap_or_default();
    assert_eq!(
        net.ask("52:54:00:00:00:01", dir).as_deref(),
        Some(WEB01),
        "{}",
        log()
    );
    assert_eq!(
        net.ask("52:54:00:00:00:02", dir).as_deref(),
        Some(WEB01_1),
        "{}",
        log()
    );
    let none = net.ask("52:54:00:00:00:99", dir);
    assert_eq!(none, None, "a MAC without a reservation: {}", log());
}
