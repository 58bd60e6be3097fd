//! Two network namespaces joined by a veth pair, a DHCP server on one side and busybox's
//! `udhcpc` on the other: what a guest is told, options included ([`Net::ask_options`]).
//! Removed however the test ends, with every process it started; every wait bounded.
//!
//! (The pattern of `tests/host_dhcp.rs`, whose script reports the address, router and host
//! name only. Branch h44/dhcp brings `tests/host/netns.rs`, the same link with the same
//! `serve_dnsmasq` and `serve_kea`: once both are merged, `ask_options` belongs there and
//! this file goes.)

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The namespaces, veth and processes of one run; `Drop` removes them all.
pub struct Net {
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
    /// `S` holds the server's end with 192.0.2.250/24 and 2001:db8:1::fe/64; `C` the
    /// client's end.
    pub fn new(tag: &str) -> Net {
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
        for (ns, dev) in [(&net.server, &vs), (&net.client, &vc)] {
            net.exec_ok(ns, &["ip", "link", "set", "lo", "up"]);
            // No duplicate address detection: the link-local addresses a DHCPv6 server and
            // client bind are usable at once.
            let dad = format!("net.ipv6.conf.{dev}.accept_dad=0");
            net.exec_ok(ns, &["sysctl", "-q", "-w", &dad]);
        }
        net.exec_ok(
            &net.server,
            &["ip", "addr", "add", "192.0.2.250/24", "dev", &vs],
        );
        net.exec_ok(
            &net.server,
            &[
                "ip",
                "addr",
                "add",
                "2001:db8:1::fe/64",
                "dev",
                &vs,
                "nodad",
            ],
        );
        net.exec_ok(&net.server, &["ip", "link", "set", &vs, "up"]);
        // Both ends up, and the server's end running (carrier), before any server starts:
        // Kea opens its sockets once, at start, and skips an interface that is not running
        // (`DHCPSRV_OPEN_SOCKET_FAIL … is not running`: no lease, 1 CI run in many).
        net.exec_ok(&net.client, &["ip", "link", "set", &vc, "up"]);
        net.wait_running(&net.server.clone(), &vs);
        net
    }

    /// Waits (at most 5 s) until `dev` in namespace `ns` has a carrier (`LOWER_UP`) and a
    /// usable link-local IPv6 address.
    fn wait_running(&self, ns: &str, dev: &str) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let out = |args: &[&str]| {
                let out = self.exec(ns, args).output().expect("run ip");
                String::from_utf8_lossy(&out.stdout).into_owned()
            };
            let link = out(&["ip", "link", "show", "dev", dev]);
            let addr = out(&["ip", "-6", "addr", "show", "dev", dev, "scope", "link"]);
            let shown = format!("{link}{addr}");
            if link.contains("LOWER_UP") && addr.contains("fe80::") && !addr.contains("tentative") {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{dev} has no carrier after 5 s: {shown}"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub fn server_if(&self) -> String {
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
    pub fn serve(&mut self, args: &[&str], env: &[(&str, &Path)], log: &Path) {
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

    /// Starts dnsmasq on the server's end with `conf`, its files in `dir`.
    pub fn serve_dnsmasq(&mut self, conf: &Path, dir: &Path) {
        let vs = self.server_if();
        self.serve(
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
                &format!("--dhcp-leasefile={}", dir.join("dnsmasq.leases").display()),
                &format!("--pid-file={}", dir.join("dnsmasq.pid").display()),
            ],
            &[],
            &dir.join("server.log"),
        );
    }

    /// Starts Kea (`kea-dhcp4` or `kea-dhcp6`) with the export `conf` as it is, but for a
    /// test server's needs: its interface (the server's end, also as each IPv6 subnet's
    /// link), a lease file in `dir` and a DHCPv6 server DUID kept in memory.
    pub fn serve_kea(&mut self, program: &str, conf: &Path, dir: &Path) {
        let root = if program == "kea-dhcp4" {
            "Dhcp4"
        } else {
            "Dhcp6"
        };
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(conf).expect("read the export"))
                .expect("JSON");
        let vs = self.server_if();
        config[root]["interfaces-config"]["interfaces"] = serde_json::json!([vs]);
        config[root]["lease-database"] = serde_json::json!({
            "type": "memfile", "persist": true,
            "name": dir.join(format!("{program}.leases.csv")).to_str().expect("UTF-8"),
        });
        if root == "Dhcp6" {
            config[root]["server-id"] = serde_json::json!({"type": "LLT", "persist": false});
            for subnet in config[root]["subnet6"].as_array_mut().expect("subnet6") {
                subnet["interface"] = serde_json::json!(vs);
            }
        }
        let conf = dir.join(format!("{program}-test.json"));
        std::fs::write(&conf, config.to_string()).expect("write the server's configuration");
        self.serve(
            &[program, "-c", conf.to_str().expect("UTF-8")],
            &[("KEA_LOCKFILE_DIR", dir), ("KEA_PIDFILE_DIR", dir)],
            &dir.join("server.log"),
        );
    }

    pub fn stop_servers(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Runs udhcpc on the client's end with `mac`, asking also for the MTU, NTP servers and
    /// classless static routes: what its script saw on `bound` (`ip=… mask=… router=…
    /// hostname=… dns=… domain=… mtu=… ntp=… routes=… lease=…`), or `None` when it got no
    /// lease. At most about 12 seconds (6 tries, 1 s apart, then `timeout`'s bound).
    pub fn ask_options(&self, mac: &str, dir: &Path) -> Option<String> {
        let vc = self.client_if();
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "down"]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "address", mac]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "up"]);
        let seen = dir.join(format!("bound-{}", mac.replace(':', "")));
        let script = dir.join("udhcpc.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n[ \"$1\" = bound ] && echo \"ip=$ip mask=$mask router=$router hostname=$hostname dns=$dns domain=$domain mtu=$mtu ntp=$ntpsrv routes=$staticroutes lease=$lease\" > {}\nexit 0\n",
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
                    "timeout",
                    "20",
                    "busybox",
                    "udhcpc",
                    "-f",
                    "-q",
                    "-n",
                    "-t",
                    "6",
                    "-T",
                    "1",
                    "-O",
                    "mtu",
                    "-O",
                    "ntpsrv",
                    "-O",
                    "staticroutes",
                    "-i",
                    &vc,
                    "-s",
                    script,
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

impl Net {
    /// Runs ISC `dhclient -6` on the client's end with `mac` (a fresh DUID-LLT, made of this
    /// MAC), asking for DNS servers, the domain search list and SNTP servers: what its
    /// script saw on `BOUND6` (`ip6=… dns=… domain=… ntp=…`), or `None` when it got no
    /// address in 15 seconds. `ip netns exec` execs the client, so killing the child ends it.
    pub fn ask6_options(&self, mac: &str, dir: &Path) -> Option<String> {
        let vc = self.client_if();
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "down"]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "address", mac]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "up"]);
        self.wait_running(&self.client, &vc);
        let tag = mac.replace(':', "");
        let seen = dir.join(format!("bound6-{tag}"));
        let script = dir.join("dhclient6.sh");
        std::fs::write(
            &script,
            format!(
                "#!/bin/sh\n[ \"$reason\" = BOUND6 ] && echo \"ip6=$new_ip6_address/$new_ip6_prefixlen dns=$new_dhcp6_name_servers domain=$new_dhcp6_domain_search ntp=$new_dhcp6_sntp_servers\" > {}\nexit 0\n",
                seen.display()
            ),
        )
        .expect("write the dhclient script");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))
            .expect("make the script executable");
        let _ = std::fs::remove_file(&seen);
        let conf = dir.join("dhclient6.conf");
        std::fs::write(
            &conf,
            "request dhcp6.name-servers, dhcp6.domain-search, dhcp6.sntp-servers;\n",
        )
        .expect("write dhclient's configuration");
        let leases = dir.join(format!("dhclient6-{tag}.leases"));
        let _ = std::fs::remove_file(&leases);
        let pid = dir.join(format!("dhclient6-{tag}.pid"));
        let log = std::fs::File::create(dir.join(format!("dhclient6-{tag}.log")))
            .expect("create the client's log");
        let path = |p: &Path| p.to_str().expect("UTF-8").to_owned();
        let mut child = self
            .exec(
                &self.client,
                &[
                    "dhclient",
                    "-6",
                    "-d",
                    "-v",
                    "-cf",
                    &path(&conf),
                    "-sf",
                    &path(&script),
                    "-lf",
                    &path(&leases),
                    "-pf",
                    &path(&pid),
                    &vc,
                ],
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log)
            .spawn()
            .expect("run dhclient -6");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        let found = loop {
            if let Ok(text) = std::fs::read_to_string(&seen)
                && text.ends_with('\n')
            {
                break Some(text.trim().to_owned());
            }
            if std::time::Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                break None;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let _ = child.kill();
        let _ = child.wait();
        found
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
