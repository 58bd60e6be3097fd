//! A dual-stack owner's claim and its release, racing, on both stores: the claim in two
//! pools and the release of the owner's two addresses each happen wholly before or wholly
//! after the other (`engine::allocate::allocate_all`, `engine::release::release_each`), so
//! the owner ends holding both addresses or neither, and every address the claim printed is
//! one the owner held. A fail point holds one command open between its two pools while the
//! other runs. Needs `cargo test --features failpoints --test owner_race` (CI runs it).
#![cfg(feature = "failpoints")]

mod pg;

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

const POOLS: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v4\nspec:\n  cidr: 10.71.0.0/24\n  kind: public\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: v6\nspec:\n  cidr: fd00:71::/120\n  kind: public\n";

const OWNER: &str = "VirtualMachine/w/0";

/// Where the commands run: a state directory, or a database.
enum Store {
    Dir(tempfile::TempDir),
    Db(pg::Db),
}

/// Makes a store to race in (with `reuseAfter` when asked): [`Store::dir`] or
/// [`Store::database`].
type MakeStore = fn(bool) -> Store;

impl Store {
    /// A state directory holding pools `v4` and `v6`, with `reuseAfter` when `cooldown` is
    /// set, and `OWNER` holding an address in each.
    fn dir(cooldown: bool) -> Store {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(pg::BIN)
            .args(["init"])
            .arg(dir.path().join("state"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", pg::stderr(&out));
        Store::Dir(dir).filled(cooldown)
    }

    /// [`Store::dir`] in a fresh database.
    fn database(cooldown: bool) -> Store {
        Store::Db(pg::Db::new()).filled(cooldown)
    }

    fn filled(self, cooldown: bool) -> Store {
        let store = self;
        let pools = if cooldown {
            POOLS.replace("  kind: public\n", "  kind: public\n  reuseAfter: 1h\n")
        } else {
            POOLS.to_owned()
        };
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), pools).unwrap();
        store.ok(&["apply", "-f", file.path().to_str().unwrap()]);
        store.ok(&["allocate", "v4", "v6", "--owner", OWNER]);
        store
    }

    fn cmd(&self, args: &[&str], failpoint: Option<&str>) -> Command {
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

    fn ok(&self, args: &[&str]) -> String {
        let out = self.cmd(args, None).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", pg::stderr(&out));
        pg::stdout(&out)
    }

    fn spawn(&self, args: &[&str], failpoint: &str) -> Child {
        self.cmd(args, Some(failpoint))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The owner's addresses, sorted.
    fn held(&self) -> Vec<String> {
        let list = self.ok(&["list", "--owner", OWNER, "-o", "json"]);
        let list: serde_json::Value = serde_json::from_str(&list).unwrap();
        let mut held: Vec<String> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["spec"]["address"].as_str().unwrap().to_owned())
            .collect();
        held.sort();
        held
    }
}

/// The lines an `allocate` (its addresses) or a `release -o name` (the names it freed)
/// printed, sorted.
fn printed(out: &Output) -> Vec<String> {
    assert!(
        out.status.success(),
        "{}\n{}",
        pg::stdout(out),
        pg::stderr(out)
    );
    let mut lines: Vec<String> = pg::stdout(out).lines().map(str::to_owned).collect();
    lines.sort();
    lines
}

/// Runs `first` held open at `failpoint` (which it passes between its two pools), then,
/// once it is there, `second`; returns both outputs.
fn race(store: &Store, first: &[&str], failpoint: &str, second: &[&str]) -> (Output, Output) {
    let held = store.spawn(first, &format!("{failpoint}=sleep(1500)"));
    std::thread::sleep(Duration::from_millis(500));
    let other = store.cmd(second, None).output().unwrap();
    (held.wait_with_output().unwrap(), other)
}

/// The owner's allocations by name (`ipallocation/v4-10-71-0-1`), as `release -o name`
/// prints what it freed, sorted.
fn names(store: &Store) -> Vec<String> {
    let mut names: Vec<String> = store
        .ok(&["list", "--owner", OWNER, "-o", "name"])
        .lines()
        .map(str::to_owned)
        .collect();
    names.sort();
    names
}

/// A dual-stack claim held open between its two pools while a release of the owner runs:
/// the release waits for the claim, so the owner holds neither address afterwards and the
/// release freed exactly the two the claim answered `existing`. Before the claim held its
/// locks in both pools at once (and, on PostgreSQL, locked the owner's rows it read), the
/// release ran in between: the claim answered the released first address `existing`,
/// claimed a second one anew, and the owner was left holding that one alone.
fn a_release_waits_for_a_claim_between_its_pools(store: MakeStore) {
    let store = store(false);
    let before = store.held();
    let freed = names(&store);
    assert_eq!(before.len(), 2);
    let (claim, release) = race(
        &store,
        &["allocate", "v4", "v6", "--owner", OWNER],
        "allocate-between-pools",
        &["release", "--owner", OWNER, "-o", "name"],
    );
    let answered = printed(&claim);
    assert_eq!(answered.len(), 2, "{answered:?}");
    let held = store.held();
    assert!(
        held.is_empty() || held == answered,
        "the owner holds {held:?} after a claim that answered {answered:?}"
    );
    assert_eq!(
        held,
        Vec::<String>::new(),
        "the release ran before the claim"
    );
    assert_eq!(
        answered, before,
        "the claim's answers were not what it held"
    );
    assert_eq!(printed(&release), freed);
}

#[test]
fn a_release_waits_for_a_dual_stack_claim_between_its_pools_in_a_state_directory() {
    a_release_waits_for_a_claim_between_its_pools(Store::dir);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_release_waits_for_a_dual_stack_claim_between_its_pools_on_postgres() {
    a_release_waits_for_a_claim_between_its_pools(Store::database);
}

/// A release of the owner's two addresses held open between them while a dual-stack claim
/// of the owner runs: the claim waits for the whole release, then claims in both pools, so
/// the owner holds two addresses, those the claim printed. Before the release held the
/// owner's locks in both pools throughout, the claim ran between the two releases: it
/// claimed the first pool anew, answered the second pool's address `existing`, and the
/// release then freed that one, leaving the owner one address. With `reuseAfter` each
/// release locks its pool exclusively, which the release takes up front instead.
fn a_claim_waits_for_a_release_between_its_pools(store: MakeStore) {
    for cooldown in [false, true] {
        let store = store(cooldown);
        let freed = names(&store);
        let (release, claim) = race(
            &store,
            &["release", "--owner", OWNER, "-o", "name"],
            "release-between-addresses",
            &["allocate", "v4", "v6", "--owner", OWNER],
        );
        assert_eq!(printed(&release), freed, "cooldown {cooldown}");
        let answered = printed(&claim);
        assert_eq!(
            store.held(),
            answered,
            "cooldown {cooldown}: the owner does not hold what the claim answered"
        );
        assert_eq!(answered.len(), 2, "{answered:?}");
    }
}

#[test]
fn a_dual_stack_claim_waits_for_a_release_between_its_pools_in_a_state_directory() {
    a_claim_waits_for_a_release_between_its_pools(Store::dir);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_dual_stack_claim_waits_for_a_release_between_its_pools_on_postgres() {
    a_claim_waits_for_a_release_between_its_pools(Store::database);
}
