//! A PostgreSQL cluster of a test's own (`.ci/pg-cluster`, durable settings), for what the
//! shared server must not go through: a failover, a shutdown and a start again. Stopped,
//! and its directory removed, however the test ends.

use std::ffi::OsStr;
use std::process::{Command, Stdio};
use std::time::Duration;

/// A running cluster in a directory of its own.
pub struct Cluster {
    dir: tempfile::TempDir,
    /// Its URL, as `.ci/pg-cluster start` printed it.
    pub url: String,
    /// Its unix socket directory and port.
    pub sock: String,
    pub port: u16,
}

/// Runs `.ci/pg-cluster ARGS…` with durable settings; its stdout.
fn pg_cluster(args: &[&OsStr]) -> String {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/pg-cluster");
    let out = Command::new("bash")
        .arg(script)
        .args(args)
        .env("PG_CLUSTER_DURABLE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{script}: {e}"));
    assert!(
        out.status.success(),
        "{script} {args:?} failed (it needs PostgreSQL's server binaries, initdb and pg_basebackup: apt-get install postgresql): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

impl Cluster {
    fn from_url(dir: tempfile::TempDir, url: String) -> Cluster {
        let param = |key: &str| {
            url.split(['?', '&'])
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no `{key}` in {url}"))
                .to_owned()
        };
        let (sock, port) = (param("host"), param("port").parse().expect("a port"));
        Cluster {
            dir,
            url,
            sock,
            port,
        }
    }

    fn fresh_dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("ipamctl-cluster-")
            .tempdir()
            .expect("a temporary directory")
    }

    /// A new primary.
    pub fn primary() -> Cluster {
        let dir = Cluster::fresh_dir();
        let url = pg_cluster(&["start".as_ref(), dir.path().as_os_str()]);
        Cluster::from_url(dir, url)
    }

    /// A new standby streaming from `self`.
    pub fn standby(&self) -> Cluster {
        let dir = Cluster::fresh_dir();
        let url = pg_cluster(&[
            "standby".as_ref(),
            self.dir.path().as_os_str(),
            dir.path().as_os_str(),
        ]);
        Cluster::from_url(dir, url)
    }

    /// Runs `.ci/pg-cluster ACTION DIR` on this cluster: `kill` (SIGKILL, as a crash),
    /// `promote` (a standby), `down` (a fast shutdown that keeps it) or `restart`.
    pub fn act(&self, action: &str) {
        pg_cluster(&[action.as_ref(), self.dir.path().as_os_str()]);
    }

    /// A client of its database `db`, as `postgres`.
    pub fn client(&self, db: &str) -> postgres::Client {
        let mut config = postgres::Config::new();
        config
            .host(&self.sock)
            .port(self.port)
            .user("postgres")
            .dbname(db)
            .connect_timeout(Duration::from_secs(10));
        config
            .connect(postgres::NoTls)
            .unwrap_or_else(|e| panic!("connecting to {}: {e}", self.sock))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/pg-cluster"))
            .arg("stop")
            .arg(self.dir.path())
            .output();
    }
}
