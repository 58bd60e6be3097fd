//! The README's pre-commit snippet, run by the real `pre-commit` tool (installed by
//! `.ci/run` when missing): a commit of a clean state directory goes through, a commit
//! that adds a bad manifest is stopped by `ipamctl check` and leaves HEAD where it was.
//! Without `pre-commit` on PATH it is ignored, saying how to install it (see `build.rs`); with
//! `CI=true` it runs, and fails, as `.ci/run` installs pre-commit.

mod book;
mod common;

use std::process::{Command, Output};

/// The README's `.pre-commit-config.yaml`: the yaml block holding `repo: local`.
fn readme_config() -> String {
    let readme = book::text();
    readme
        .split("```yaml\n")
        .skip(1)
        .filter_map(|rest| rest.split_once("```").map(|(block, _)| block))
        .find(|block| block.contains("repo: local"))
        .expect("README.md has a yaml block with `repo: local`")
        .to_owned()
}

struct Repo {
    dir: tempfile::TempDir,
    path: String,
}

impl Repo {
    fn run(&self, program: &str, args: &[&str]) -> Output {
        Command::new(program)
            .args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("HOME", self.dir.path().join(".home"))
            .env("PRE_COMMIT_HOME", self.dir.path().join(".home/pre-commit"))
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.org")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.org")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("NO_COLOR", "1")
            .env_remove("IPAMCTL_STATE_DIR")
            .env_remove("IPAMCTL_STORE")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run {program}: {e}"))
    }

    #[track_caller]
    fn ok(&self, program: &str, args: &[&str]) -> String {
        let out = self.run(program, args);
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn head(&self) -> String {
        self.ok("git", &["rev-parse", "HEAD"])
    }
}

#[test]
#[cfg_attr(
    not(has_pre_commit),
    ignore = "needs pre-commit: pip install pre-commit"
)]
fn the_readme_pre_commit_hook_stops_a_commit_of_a_bad_manifest() {
    let path = common::path_with_bin();
    let repo = Repo {
        dir: tempfile::tempdir().expect("a temporary directory"),
        path,
    };
    let found = repo.run("pre-commit", &["--version"]);
    assert!(
        found.status.success(),
        "`pre-commit` is not installed: python3 -m pip install pre-commit (.ci/run does)"
    );
    std::fs::create_dir_all(repo.dir.path().join(".home")).expect("a home");
    repo.ok("git", &["init", "-q", "-b", "main"]);
    repo.ok("ipamctl", &["init", "."]);
    std::fs::write(
        repo.dir.path().join(".pre-commit-config.yaml"),
        readme_config(),
    )
    .expect("write the config");
    // The test's own home (pre-commit's cache) stays out of the repository.
    let ignore = repo.dir.path().join(".gitignore");
    let ignored = std::fs::read_to_string(&ignore).expect("ipamctl init writes .gitignore");
    std::fs::write(&ignore, format!("{ignored}/.home/\n")).expect("write .gitignore");
    repo.ok("pre-commit", &["install"]);
    let pools = common::demo_pools();
    repo.ok("ipamctl", &["apply", "-f", pools.to_str().expect("UTF-8")]);
    repo.ok(
        "ipamctl",
        &["allocate", "public-zone-a", "--owner", "FloatingIP/a"],
    );
    repo.ok("git", &["add", "-A"]);
    let commit = repo.run("git", &["commit", "-q", "-m", "Pools and a claim"]);
    let said = String::from_utf8_lossy(&commit.stdout).into_owned()
        + &String::from_utf8_lossy(&commit.stderr);
    assert!(commit.status.success(), "a clean state must commit: {said}");
    assert!(
        said.contains("ipamctl check"),
        "the hook did not run: {said}"
    );
    let before = repo.head();

    // An allocation whose address is not a candidate of its pool (the gateway).
    let bad = "cluster/ipallocations/public-zone-a-203-0-113-1.yaml";
    let good = std::fs::read_to_string(
        repo.dir
            .path()
            .join("cluster/ipallocations/public-zone-a-203-0-113-4.yaml"),
    )
    .expect("the claim's file");
    std::fs::write(
        repo.dir.path().join(bad),
        good.replace("203-0-113-4", "203-0-113-1")
            .replace("203.0.113.4", "203.0.113.1")
            .replace("name: a", "name: b"),
    )
    .expect("write a bad manifest");
    repo.ok("git", &["add", bad]);
    let refused = repo.run("git", &["commit", "-q", "-m", "Claim the gateway by hand"]);
    let said = String::from_utf8_lossy(&refused.stdout).into_owned()
        + &String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "the bad manifest was committed: {said}"
    );
    assert!(
        said.contains("ipamctl check") && said.contains("Failed"),
        "{said}"
    );
    assert!(
        said.contains(bad),
        "the hook's output names the file: {said}"
    );
    assert_eq!(repo.head(), before, "HEAD moved");
}
