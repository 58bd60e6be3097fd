//! The README's PostgreSQL set-up, run as written: the roles and grants of "Roles and
//! grants" are enough for every kind of command (and `init` needs its own), a missing grant
//! is one error naming the statement to run, and the PgBouncer configuration of "Behind
//! PgBouncer" serves claims (the roles' names, the database's, paths and ports replaced by
//! the test's own; nothing else).

mod book;
mod common;

use std::process::{Command, Output, Stdio};

use common::pg::{self, Db, assert_code, stderr, stdout};
use common::{assert_one_error, code};

/// The README and the book's pages, one after another.
fn readme() -> String {
    book::text()
}

/// The first fenced block with info string `info` after the paragraph starting `lead`.
fn block_after(lead: &str, info: &str) -> String {
    let text = readme();
    let after = text
        .split(lead)
        .nth(1)
        .unwrap_or_else(|| panic!("the README has no `{lead}` paragraph"));
    let fence = format!("\n```{info}\n");
    let block = after
        .split(&fence)
        .nth(1)
        .unwrap_or_else(|| panic!("no ```{info} block after `{lead}`"));
    block.split("\n```").next().expect("its end").to_owned()
}

/// Two roles of this test's own (roles are the whole server's) and its database.
struct Roles {
    db: Db,
    admin: String,
    app: String,
}

impl Roles {
    /// The README's statements with its names replaced: the part for the superuser, then,
    /// after `ipamctl init` as the admin role, the part for the admin role.
    fn set_up() -> Roles {
        let db = Db::empty();
        let suffix = db.name().trim_start_matches("ipamctl_test_").to_owned();
        let (admin, app) = (format!("ipam_admin_{suffix}"), format!("ipam_{suffix}"));
        let sql = block_after("**Roles and grants.**", "sql")
            .replace("ipam_admin", "ADMIN")
            .replace("DATABASE ipam ", &format!("DATABASE {} ", db.name()))
            .replace("ROLE ipam ", &format!("ROLE {app} "))
            .replace("TO ipam;", &format!("TO {app};"))
            .replace("ADMIN", &admin);
        let (superuser, owner) = sql
            .split_once(&format!("-- as {admin}"))
            .expect("the README's statements say which run as the admin role");
        assert!(
            !sql.contains(" ipam ") && !sql.contains(" ipam;"),
            "a name left: {sql}"
        );
        let mut client = db.sql();
        client
            .batch_execute(superuser)
            .expect("the superuser's part");
        let roles = Roles { db, admin, app };
        assert_code(&roles.run(&roles.admin, &["init"]), code::OK);
        let owner = owner.split_once('\n').map_or("", |(_, rest)| rest);
        client
            .batch_execute(&format!("SET ROLE {}; {owner}; RESET ROLE", roles.admin))
            .expect("the admin role's part");
        roles
    }

    /// The database's connection string as `role`.
    fn url(&self, role: &str) -> String {
        format!("{}&user={role}", self.db.url)
    }

    fn cmd(&self, role: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(pg::BIN);
        cmd.arg("--store")
            .arg(self.url(role))
            .args(args)
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, role: &str, args: &[&str]) -> Output {
        self.cmd(role, args).output().expect("run ipamctl")
    }
}

impl Drop for Roles {
    fn drop(&mut self) {
        // Best effort: a shared server keeps no roles of ours.
        let _ = self.db.sql().batch_execute(&format!(
            "REASSIGN OWNED BY {a} TO CURRENT_USER; DROP OWNED BY {a}, {b}; DROP ROLE {a}, {b};",
            a = self.admin,
            b = self.app
        ));
    }
}

const POOLS: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: edge}
spec: {cidr: 192.0.2.0/28, kind: public, reuseAfter: 1h}
---
apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata: {name: carrier}
spec: {cidr: 10.128.0.0/12, kind: supernet}
";

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn the_readme_grants_are_enough_for_every_command_but_init() {
    let roles = Roles::set_up();
    let dir = tempfile::tempdir().unwrap();
    let pools = dir.path().join("pools.yaml");
    std::fs::write(&pools, POOLS).unwrap();
    let export = dir.path().join("export");
    let app = roles.app.clone();
    for args in [
        vec!["apply", "-f", pools.to_str().unwrap()],
        vec!["allocate", "edge", "--owner", "FloatingIP/a"],
        vec!["release", "edge", "--owner", "FloatingIP/a"],
        vec![
            "allocate",
            "carrier",
            "--prefix-length",
            "24",
            "--owner",
            "FloatingIP/p",
        ],
        vec!["vpc", "create", "v1", "-n", "t1", "--cidr", "10.9.0.0/16"],
        vec![
            "subnet",
            "create",
            "web",
            "-n",
            "t1",
            "--pool",
            "vpc-v1",
            "--prefix-length",
            "24",
        ],
        vec![
            "allocate",
            "vpc-v1",
            "-n",
            "t1",
            "--owner",
            "VirtualMachine/x/0",
        ],
        vec!["list", "-A"],
        vec!["pool", "list"],
        vec!["report"],
        vec!["metrics", "--check"],
        vec!["history", "--owner", "FloatingIP/a"],
        vec!["vpc", "delete", "v1", "-n", "t1"],
        vec!["export", export.to_str().unwrap()],
        vec!["import", export.to_str().unwrap()],
        vec!["check"],
    ] {
        let out = roles.run(&app, &args);
        assert_code(&out, code::OK);
        assert!(
            !stderr(&out).contains("error:"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // `init` is the admin role's: the application role is told which grant it lacks.
    let out = roles.run(&app, &["init"]);
    assert_code(&out, code::FAILURE);
    assert_one_error(&stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "GRANT CREATE ON DATABASE {} TO {app}",
            roles.db.name()
        )),
        "{}",
        stderr(&out)
    );
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_missing_grant_is_one_error_naming_the_statement_to_run() {
    let roles = Roles::set_up();
    let app = roles.app.clone();
    let mut client = roles.db.sql();
    for (revoke, grant, args) in [
        (
            "REVOKE USAGE ON ALL SEQUENCES IN SCHEMA ipamctl FROM",
            "GRANT USAGE ON ALL SEQUENCES IN SCHEMA ipamctl TO",
            vec!["vpc", "create", "v2", "-n", "t2", "--cidr", "10.10.0.0/16"],
        ),
        (
            "REVOKE SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ipamctl FROM",
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ipamctl TO",
            vec!["pool", "list"],
        ),
        (
            "REVOKE USAGE ON SCHEMA ipamctl FROM",
            "GRANT USAGE ON SCHEMA ipamctl TO",
            vec!["list"],
        ),
    ] {
        client
            .batch_execute(&format!(
                "SET ROLE {}; {revoke} {app}; RESET ROLE",
                roles.admin
            ))
            .unwrap();
        let out = roles.run(&app, &args);
        assert_code(&out, code::FAILURE);
        assert_one_error(&stderr(&out));
        assert!(
            stderr(&out).contains(&format!("(42501): the role `{app}` lacks a grant; as the schema's owner run: {grant} {app}\n")),
            "{args:?}: {}",
            stderr(&out)
        );
        // The statement it names is the cure.
        client
            .batch_execute(&format!(
                "SET ROLE {}; {grant} {app}; RESET ROLE",
                roles.admin
            ))
            .unwrap();
        assert_code(&roles.run(&app, &args), code::OK);
    }
}

/// PgBouncer started with the README's configuration, the test's paths, ports, role and
/// database put in; stopped when dropped.
struct Pooler {
    child: std::process::Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Pooler {
    fn start(roles: &Roles, password: &str) -> Pooler {
        let info = ipamctl::store::pg::conninfo::ConnInfo::parse(pg::server()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let d = dir.path().display();
        let ini = block_after("**Behind PgBouncer.**", "ini")
            .replace(
                "host=/run/postgresql port=5432 dbname=ipam",
                &format!(
                    "host={} port={} dbname={}",
                    info.get("host").unwrap(),
                    info.get("port").unwrap(),
                    roles.db.name()
                ),
            )
            .replace("listen_port = 6432", &format!("listen_port = {port}"))
            .replace("/run/pgbouncer", &d.to_string())
            .replace("/etc/pgbouncer/userlist.txt", &format!("{d}/userlist.txt"));
        assert!(ini.contains("pool_mode = transaction"), "{ini}");
        std::fs::write(dir.path().join("pgbouncer.ini"), ini).unwrap();
        std::fs::write(
            dir.path().join("userlist.txt"),
            format!("\"{}\" \"{password}\"\n", roles.app),
        )
        .unwrap();
        let program = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .unwrap_or("pgbouncer");
        let mut cmd = Command::new(program);
        // It refuses to run as root: then as the user the test cluster runs as.
        if is_root() {
            let user = std::env::var("IPAMCTL_PG_USER").unwrap_or_else(|_| "nobody".into());
            let ok = Command::new("chown")
                .arg("-R")
                .arg(&user)
                .arg(dir.path())
                .status();
            assert!(ok.unwrap().success(), "chown {user} {d}");
            cmd.args(["-u", &user]);
        }
        let child = cmd
            .arg(dir.path().join("pgbouncer.ini"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start pgbouncer (apt-get install pgbouncer)");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "pgbouncer did not start"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Pooler { child, dir, port }
    }
}

impl Drop for Pooler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = &self.dir;
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

#[test]
#[cfg_attr(
    not(all(has_postgres, has_pgbouncer)),
    ignore = "needs PostgreSQL and PgBouncer: apt-get install postgresql pgbouncer"
)]
fn the_readme_pgbouncer_configuration_serves_claims() {
    let roles = Roles::set_up();
    let password = "correct-horse-battery";
    let pooler = Pooler::start(&roles, password);
    let dir = tempfile::tempdir().unwrap();
    let pools = dir.path().join("pools.yaml");
    std::fs::write(&pools, POOLS).unwrap();
    // The README's string, the test's role and port in it; the password from the environment.
    let store = format!("postgresql://{}@127.0.0.1:{}/ipam", roles.app, pooler.port);
    let run = |args: &[&str]| {
        Command::new(pg::BIN)
            .arg("--store")
            .arg(&store)
            .args(args)
            .env("PGPASSWORD", password)
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .stdin(Stdio::null())
            .output()
            .expect("run ipamctl")
    };
    assert_code(&run(&["apply", "-f", pools.to_str().unwrap()]), code::OK);
    // Claims at once through the pooler: each owner one address, none twice.
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(pg::BIN)
                .arg("--store")
                .arg(&store)
                .args(["allocate", "edge", "--owner", &format!("FloatingIP/f-{i}")])
                .env("PGPASSWORD", password)
                .env_remove("IPAMCTL_STORE")
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut got: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            assert_code(&out, code::OK);
            stdout(&out).trim().to_owned()
        })
        .collect();
    got.sort();
    got.dedup();
    assert_eq!(got.len(), 8, "{got:?}");
    let again = run(&["allocate", "edge", "--owner", "FloatingIP/f-3"]);
    assert_code(&again, code::OK);
    assert!(got.contains(&stdout(&again).trim().to_owned()));
    assert_code(
        &run(&["release", "edge", "--owner", "FloatingIP/f-3"]),
        code::OK,
    );
    let listed = run(&["list", "-o", "name"]);
    assert_code(&listed, code::OK);
    assert_eq!(stdout(&listed).lines().count(), 7);
}
