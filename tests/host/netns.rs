//! A link with a DHCP server on one end and a real client on the other: two network
//! namespaces joined by a veth pair, the server's end holding 192.0.2.250/24 and
//! 2001:db8:1::fe/64, the client's end taking whatever MAC a test asks with. IPv4 clients are
//! busybox's `udhcpc`, IPv6 clients ISC `dhclient -6`. Only TEST-NET and documentation
//! addresses, only namespaces made here (removed, with every process started, however the
//! test ends), every wait bounded.
//! Every host-tier test that runs a real server and client uses this one link.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The namespaces, veth and processes of one run; `Drop` removes them all.
pub struct Net {
    pub server: String,
    pub client: String,
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
    /// Both ends up, with carrier; IPv6 duplicate address detection off on both, so that the
    /// link-local addresses a DHCPv6 server and client bind are usable at once.
    pub fn new(tag: &str) -> Net {
        let id = format!("{}{tag}", std::process::id() % 100_000);
        let net = Net {
            server: format!("ipamctl-s{id}"),
            client: format!("ipamctl-c{id}"),
            children: Vec::new(),
        };
        let (vs, vc) = (net.server_if(), net.client_if());
        ip(&["netns", "add", &net.server]);
        ip(&["netns", "add", &net.client]);
        ip(&["link", "add", &vs, "type", "veth", "peer", "name", &vc]);
        ip(&["link", "set", &vs, "netns", &net.server]);
        ip(&["link", "set", &vc, "netns", &net.client]);
        for (ns, dev) in [(&net.server, &vs), (&net.client, &vc)] {
            net.exec_ok(ns, &["ip", "link", "set", "lo", "up"]);
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
        // Kea opens its sockets once, at start, and skips an interface that is not running.
        net.exec_ok(&net.client, &["ip", "link", "set", &vc, "up"]);
        net.wait_running(&net.server.clone(), &vs);
        net
    }

    /// Waits (at most 5 s) until `dev` in namespace `ns` has a carrier (`LOWER_UP`) and a
    /// link-local IPv6 address.
    fn wait_running(&self, ns: &str, dev: &str) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let link = self.output(ns, &["ip", "link", "show", "dev", dev]);
            let addr = self.output(
                ns,
                &["ip", "-6", "addr", "show", "dev", dev, "scope", "link"],
            );
            if link.contains("LOWER_UP") && addr.contains("fe80::") && !addr.contains("tentative") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{dev} not running after 5 s: {link}{addr}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn output(&self, ns: &str, args: &[&str]) -> String {
        let out = self.exec(ns, args).output().expect("run ip netns exec");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The server's end of the veth.
    pub fn server_if(&self) -> String {
        format!("vs{}", &self.server["ipamctl-s".len()..])
    }

    /// The client's end of the veth.
    pub fn client_if(&self) -> String {
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

    /// Starts a server in the server's namespace, its output in `log`; it is killed when
    /// the test ends.
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

    /// Serves the dnsmasq configuration `conf` on the server's end, with its lease file at
    /// `dir/dnsmasq.leases` (returned) and its log at `dir/server.log`.
    pub fn serve_dnsmasq(&mut self, conf: &Path, dir: &Path) -> PathBuf {
        let vs = self.server_if();
        let leases = dir.join("dnsmasq.leases");
        let pid = dir.join("dnsmasq.pid");
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
                &format!("--dhcp-leasefile={}", leases.display()),
                &format!("--pid-file={}", pid.display()),
            ],
            &[],
            &dir.join("server.log"),
        );
        leases
    }

    /// Serves the Kea `Dhcp4` export `conf` as it is (its `--interface` names the server's
    /// end), but for a memfile lease file at `dir/kea-leases4.csv` (returned); its log at
    /// `dir/server.log`.
    pub fn serve_kea4(&mut self, conf: &Path, dir: &Path) -> PathBuf {
        self.serve_kea("Dhcp4", conf, dir)
    }

    /// [`Net::serve_kea4`] for a `Dhcp6` export (lease file `dir/kea-leases6.csv`), with the
    /// server's DUID kept in memory (a test server writes nothing outside `dir`).
    pub fn serve_kea6(&mut self, conf: &Path, dir: &Path) -> PathBuf {
        self.serve_kea("Dhcp6", conf, dir)
    }

    fn serve_kea(&mut self, root: &str, conf: &Path, dir: &Path) -> PathBuf {
        let (program, leases) = match root {
            "Dhcp4" => ("kea-dhcp4", dir.join("kea-leases4.csv")),
            _ => ("kea-dhcp6", dir.join("kea-leases6.csv")),
        };
        let mut config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(conf).expect("read the export"))
                .expect("the export is JSON");
        config[root]["lease-database"] = serde_json::json!({
            "type": "memfile", "persist": true, "lfc-interval": 0,
            "name": leases.to_str().expect("UTF-8"),
        });
        if root == "Dhcp6" {
            config[root]["server-id"] = serde_json::json!({"type": "LLT", "persist": false});
        }
        // Kea opens its sockets once at start, and on a loaded machine that can fail
        // (`DHCP4_OPEN_SOCKETS_FAILED`: no lease, seen on a run of several host suites at
        // once); retried, it opens them once the link is usable.
        config[root]["interfaces-config"]["service-sockets-max-retries"] = serde_json::json!(50);
        config[root]["interfaces-config"]["service-sockets-retry-wait-time"] =
            serde_json::json!(100);
        let conf = dir.join(format!("{program}-test.json"));
        std::fs::write(&conf, config.to_string()).expect("write the test configuration");
        self.serve(
            &[program, "-c", conf.to_str().expect("UTF-8")],
            &[("KEA_LOCKFILE_DIR", dir), ("KEA_PIDFILE_DIR", dir)],
            &dir.join("server.log"),
        );
        leases
    }

    /// The client's end with `mac`, down and up again (a new link-local address).
    fn take_mac(&self, mac: &str) {
        let vc = self.client_if();
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "down"]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "address", mac]);
        self.exec_ok(&self.client, &["ip", "link", "set", &vc, "up"]);
        self.wait_running(&self.client, &vc);
    }

    /// Runs udhcpc on the client's end with `mac`: what its script saw on `bound`
    /// (`ip=… mask=… router=… hostname=…`), or `None` when it got no lease. At most about
    /// 12 seconds (6 tries, 1 s apart, then `timeout`'s bound).
    pub fn ask(&self, mac: &str, dir: &Path) -> Option<String> {
        self.udhcpc(mac, dir, "", &[])
    }

    /// [`Net::ask`], asking also for the MTU, NTP servers and classless static routes: `ip=…
    /// mask=… router=… hostname=… dns=… domain=… mtu=… ntp=… routes=… lease=…`.
    pub fn ask_options(&self, mac: &str, dir: &Path) -> Option<String> {
        self.udhcpc(
            mac,
            dir,
            " dns=$dns domain=$domain mtu=$mtu ntp=$ntpsrv routes=$staticroutes lease=$lease",
            &["-O", "mtu", "-O", "ntpsrv", "-O", "staticroutes"],
        )
    }

    /// udhcpc with `mac`, its script printing the address, mask, router and host name, then
    /// `more` (shell text), with `flags` added.
    fn udhcpc(&self, mac: &str, dir: &Path, more: &str, flags: &[&str]) -> Option<String> {
        self.take_mac(mac);
        let seen = dir.join(format!("bound-{}", mac.replace(':', "")));
        let script = script(
            dir,
            "udhcpc.sh",
            &format!(
                "[ \"$1\" = bound ] && echo \"ip=$ip mask=$mask router=$router hostname=$hostname{more}\" > {}",
                seen.display()
            ),
        );
        let _ = std::fs::remove_file(&seen);
        let vc = self.client_if();
        let mut args = vec![
            "timeout", "20", "busybox", "udhcpc", "-f", "-q", "-n", "-t", "6", "-T", "1",
        ];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["-i", &vc, "-s", &script]);
        let out = self.exec(&self.client, &args).output().expect("run udhcpc");
        let text = std::fs::read_to_string(&seen).ok()?;
        assert!(
            out.status.success(),
            "udhcpc: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(text.trim().to_owned())
    }

    /// Runs `dhclient -6` on the client's end with `mac` (a fresh DUID-LLT, so one made of
    /// this MAC): the address its script saw on `BOUND6` (`ip6=ADDRESS/LEN`), or `None`
    /// when it got none in 15 seconds. `ip netns exec` execs the client, so killing the
    /// child ends it.
    pub fn ask6(&self, mac: &str, dir: &Path) -> Option<String> {
        self.dhclient6(mac, dir, "", "")
    }

    /// [`Net::ask6`], asking also for DNS servers, the domain search list and SNTP servers,
    /// and proposing the host name `guest` in a Client FQDN option (DHCPv6 tells a host name
    /// only in reply to one): `ip6=… dns=… domain=… ntp=… host=…`, the host name being the
    /// one the server answered with.
    pub fn ask6_options(&self, mac: &str, dir: &Path) -> Option<String> {
        self.dhclient6(
            mac,
            dir,
            " dns=$new_dhcp6_name_servers domain=$new_dhcp6_domain_search ntp=$new_dhcp6_sntp_servers host=$new_fqdn_hostname",
            "send fqdn.fqdn \"guest\";\nsend fqdn.server-update on;\n\
             request dhcp6.name-servers, dhcp6.domain-search, dhcp6.sntp-servers, dhcp6.fqdn;\n",
        )
    }

    /// dhclient -6 with `mac`, its script printing the address then `more` (shell text), its
    /// configuration `conf`.
    fn dhclient6(&self, mac: &str, dir: &Path, more: &str, conf_text: &str) -> Option<String> {
        self.take_mac(mac);
        let tag = mac.replace(':', "");
        let seen = dir.join(format!("bound6-{tag}"));
        let script = script(
            dir,
            "dhclient6.sh",
            &format!(
                "[ \"$reason\" = BOUND6 ] && echo \"ip6=$new_ip6_address/$new_ip6_prefixlen{more}\" > {}",
                seen.display()
            ),
        );
        let _ = std::fs::remove_file(&seen);
        let conf = dir.join("dhclient6.conf");
        std::fs::write(&conf, conf_text).expect("write dhclient's configuration");
        let leases = dir.join(format!("dhclient6-{tag}.leases"));
        let _ = std::fs::remove_file(&leases);
        let pid = dir.join(format!("dhclient6-{tag}.pid"));
        let vc = self.client_if();
        let log = std::fs::File::create(dir.join(format!("dhclient6-{tag}.log")))
            .expect("create the client's log");
        let mut child = self
            .exec(
                &self.client,
                &[
                    "dhclient",
                    "-6",
                    "-d",
                    "-v",
                    "-cf",
                    conf.to_str().expect("UTF-8"),
                    "-sf",
                    &script,
                    "-lf",
                    leases.to_str().expect("UTF-8"),
                    "-pf",
                    pid.to_str().expect("UTF-8"),
                    &vc,
                ],
            )
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log again"))
            .stderr(log)
            .spawn()
            .expect("run dhclient -6");
        let deadline = Instant::now() + Duration::from_secs(15);
        let found = loop {
            if let Ok(text) = std::fs::read_to_string(&seen)
                && text.ends_with('\n')
            {
                break Some(text.trim().to_owned());
            }
            if Instant::now() > deadline || child.try_wait().ok().flatten().is_some() {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let _ = child.kill();
        let _ = child.wait();
        found
    }
}

/// What the servers started with `dir` wrote (empty if nothing yet): for messages.
pub fn server_log(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
}

/// An executable shell script `name` in `dir` running `body`, exiting 0; its path.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\nexit 0\n")).expect("write a script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("make the script executable");
    path.to_str().expect("UTF-8").to_owned()
}

impl Net {
    /// Kills the servers started (their lease files are then complete).
    pub fn stop_servers(&mut self) {
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
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
