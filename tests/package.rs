//! The Debian package an operator installs: `cargo deb` builds it (in a target directory of
//! its own, so as not to wait on the one `cargo test` holds), `dpkg -i` installs it on this
//! machine, the installed binary names its version and commit, its man page renders, the
//! shells' completion scripts are where bash, zsh and fish look, and `dpkg --purge` removes
//! every file it installed. Needs root, dpkg, man and cargo-deb (`.ci/run` installs them).

mod book;
mod common;

use std::path::Path;
use std::process::{Command, Output};

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {program}: {e}"))
}

#[track_caller]
fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
#[cfg_attr(
    not(all(has_root, has_cargo_deb)),
    ignore = "needs root, dpkg, man, systemd-analyze and cargo-deb (apt-get install dpkg man-db systemd; cargo install --locked cargo-deb)"
)]
fn the_debian_package_installs_runs_and_purges_cleanly() {
    common::needs::require("dpkg");
    common::needs::require("systemd-analyze");
    common::needs::require("man");
    common::needs::require("cargo-deb");
    assert!(
        !run("dpkg", &["-s", "ipamctl"]).status.success(),
        "ipamctl is already installed as a package here; remove it first (dpkg --purge ipamctl)"
    );
    let root = book::root();
    let target = root.join("target/package");
    let built = Command::new("cargo")
        .args(["deb", "--locked", "--output"])
        .arg(target.join("ipamctl.deb"))
        .current_dir(root)
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .expect("run cargo deb");
    ok(&built);
    let deb = target.join("ipamctl.deb");
    let deb = deb.to_str().expect("a UTF-8 path");

    let listed = ok(&run("dpkg-deb", &["--contents", deb]));
    for path in [
        "./usr/bin/ipamctl",
        "./usr/share/man/man1/ipamctl.1",
        "./usr/share/man/man1/ipamctl-allocate.1",
        "./usr/share/bash-completion/completions/ipamctl",
        "./usr/share/zsh/vendor-completions/_ipamctl",
        "./usr/share/fish/vendor_completions.d/ipamctl.fish",
        "./usr/share/doc/ipamctl/CHANGELOG.md",
        "./usr/share/man/man1/ipamctl-serve.1",
        "ipamctl.service",
    ] {
        assert!(
            listed.contains(path),
            "{path} is not in the package:\n{listed}"
        );
    }

    // A container may keep dpkg from installing man pages (`path-exclude`): not these.
    ok(&run(
        "dpkg",
        &["-i", "--path-include=/usr/share/man/*", deb],
    ));
    let installed = std::panic::catch_unwind(|| {
        // The version and the commit this checkout is at.
        let version = ok(&run("/usr/bin/ipamctl", &["--version"]));
        let commit = ok(&run(
            "git",
            &[
                "-C",
                root.to_str().unwrap(),
                "rev-parse",
                "--short=12",
                "HEAD",
            ],
        ));
        assert_eq!(
            version,
            format!(
                "ipamctl {} (commit {})\n",
                env!("CARGO_PKG_VERSION"),
                commit.trim()
            )
        );
        // It works: a state directory made and read by the installed binary.
        let dir = tempfile::tempdir().expect("a scratch directory");
        let state = dir.path().join("state");
        ok(&run("/usr/bin/ipamctl", &["init", state.to_str().unwrap()]));
        let pools = common::fixture("demo").join("pools.yaml");
        ok(&run(
            "/usr/bin/ipamctl",
            &[
                "-d",
                state.to_str().unwrap(),
                "apply",
                "-f",
                pools.to_str().unwrap(),
            ],
        ));
        let listed = ok(&run(
            "/usr/bin/ipamctl",
            &["-d", state.to_str().unwrap(), "pool", "list"],
        ));
        assert!(listed.contains("vpc-main"), "{listed}");
        // `man` finds the installed page by name.
        let page = Command::new("man")
            .args(["-P", "cat", "ipamctl-allocate"])
            .env("MANWIDTH", "100")
            .output()
            .expect("run man");
        let page = ok(&page);
        assert!(page.contains("EXIT STATUS"), "{page}");
        // bash loads the completion from where the package put it.
        let bash = ok(&run(
            "bash",
            &[
                "-c",
                "source /usr/share/bash-completion/completions/ipamctl && complete -p ipamctl",
            ],
        ));
        assert!(bash.contains("ipamctl"), "{bash}");
        // The server's unit: installed disabled, its user made, and accepted by systemd
        // (its ExecStart's binary and its Documentation's man page are where it says).
        let unit = [
            "/usr/lib/systemd/system/ipamctl.service",
            "/lib/systemd/system/ipamctl.service",
        ]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("the unit is installed");
        ok(&run("systemd-analyze", &["verify", unit]));
        let text = std::fs::read_to_string(unit).unwrap();
        for hardening in [
            "User=ipamctl",
            "ProtectSystem=strict",
            "StateDirectory=ipamctl",
            "NoNewPrivileges=yes",
        ] {
            assert!(
                text.contains(hardening),
                "{hardening} not in the unit:\n{text}"
            );
        }
        ok(&run("getent", &["passwd", "ipamctl"]));
    });
    let files = ok(&run("dpkg", &["-L", "ipamctl"]));
    ok(&run("dpkg", &["--purge", "ipamctl"]));
    if let Err(panic) = installed {
        std::panic::resume_unwind(panic);
    }
    // Every file the package installed is gone.
    for line in files.lines() {
        let path = Path::new(line);
        if line.starts_with("/usr/share/doc/ipamctl") || line.contains("/ipamctl") {
            assert!(!path.exists(), "{line} is left after dpkg --purge");
        }
    }
    assert!(!run("dpkg", &["-s", "ipamctl"]).status.success());
}
