//! A state directory or a database, for the tests that start `ipamctl` processes themselves
//! on either store (`tests/owner_race.rs`, `tests/identity_race.rs`): the same commands,
//! with `-d` or `--store`, and a fail point when asked.

#![allow(dead_code)]

#[path = "../pg/mod.rs"]
pub mod pg;

use std::process::{Command, Stdio};

/// Where the commands run: a state directory, or a database.
pub enum Store {
    Dir(tempfile::TempDir),
    Db(pg::Db),
}

impl Store {
    /// A new state directory (or database, with `db`) holding `manifests`, applied.
    pub fn new(db: bool, manifests: &str) -> Store {
        let store = if db {
            // Only tests marked `has_postgres` ask for a database (tests/tools.rs reads this
            // gate: what a database needs is not asked of the state directory's tests).
            if !cfg!(has_postgres) {
                panic!("a database store needs PostgreSQL: mark the test `has_postgres`");
            }
            Store::Db(pg::Db::new())
        } else {
            let dir = tempfile::tempdir().unwrap();
            let out = Command::new(pg::BIN)
                .arg("init")
                .arg(dir.path().join("state"))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", pg::stderr(&out));
            Store::Dir(dir)
        };
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), manifests).unwrap();
        store.ok(&["apply", "-f", file.path().to_str().unwrap()]);
        store
    }

    /// `ipamctl ARGS` on this store, stdin closed, with `FAILPOINTS` set to `failpoint`
    /// (none from the environment).
    pub fn cmd(&self, args: &[&str], failpoint: Option<&str>) -> Command {
        let mut cmd = match self {
            Store::Db(db) => db.cmd(args),
            Store::Dir(dir) => {
                let mut cmd = Command::new(pg::BIN);
                cmd.arg("-d").arg(dir.path().join("state")).args(args);
                cmd
            }
        };
        cmd.env_remove("FAILPOINTS").stdin(Stdio::null());
        if let Some(f) = failpoint {
            cmd.env("FAILPOINTS", f);
        }
        cmd
    }

    /// Runs `ipamctl ARGS` to success; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args, None).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", pg::stderr(&out));
        pg::stdout(&out)
    }

    /// Starts `ipamctl ARGS` with its output captured, held at `failpoint` if given.
    pub fn spawn(&self, args: &[&str], failpoint: Option<&str>) -> std::process::Child {
        self.cmd(args, failpoint)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}
