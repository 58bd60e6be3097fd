//! Names the state directory's layout makes paths of cannot collide (issue 46, finding 3): a
//! namespace segment that is a directory of the layout (`macs/`, `ipampools/`, …) is refused
//! by every writer with exit 2 naming it, on both stores, and a state directory that has one
//! already (made by hand, or by an ipamctl that did not reserve it yet) is an error `check`
//! names, never a namespace it skips.

mod common;

use common::{Test, code};

/// Every directory a scope of the layout holds, as the user sees them on disk (the library
/// keeps them in `model::layout`, whose unit tests check they are all reserved).
const LAYOUT_DIRS: [&str; 6] = [
    "ipampools",
    "ipallocations",
    "subnets",
    "cooldown",
    "ipprefixclaims",
    "macs",
];

/// A private pool manifest `name` in namespace `ns`.
fn pool(name: &str, ns: &str, cidr: &str, extra: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  cidr: {cidr}\n  kind: private\n{extra}"
    )
}

/// An allocation manifest of `owner` (`KIND/NAME`) at `addr` in pool `p` of `ns`, as
/// ipamctl writes it.
fn allocation(ns: &str, p: &str, addr: &str, owner: &str) -> String {
    let (kind, name) = owner.split_once('/').expect("KIND/NAME");
    let dashed = addr.replace('.', "-");
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAllocation\nmetadata:\n  name: {p}-{dashed}\n  namespace: {ns}\n  creationTimestamp: \"2026-01-01T00:00:00Z\"\n  labels:\n    pivirt.hu/managed-by: director\nspec:\n  pool: {p}\n  address: \"{addr}\"\n  owner:\n    kind: {kind}\n    name: {name}\n"
    )
}

#[test]
fn every_writer_refuses_a_namespace_segment_the_layout_uses() {
    // Every directory as a segment below a namespace, and `macs` (the one not reserved
    // before) at the top too.
    let namespaces = LAYOUT_DIRS
        .iter()
        .map(|dir| (*dir, format!("acme/{dir}")))
        .chain([("macs", "macs".to_owned())]);
    for (dir, ns) in namespaces {
        let reserved = format!("segment `{dir}` is reserved by the state directory layout");
        let t = Test::new("seed");
        let input = t.input("pool.yaml", &pool("q", &ns, "10.1.0.0/24", ""));
        let ran = t.args(["apply", "-f", &input]).fails(code::INVALID).run();
        assert!(ran.stderr.contains(&format!("`{ns}`")), "{}", ran.stderr);
        assert!(ran.stderr.contains(&reserved), "{}", ran.stderr);

        let ran = ran
            .then()
            .args(["allocate", "q", "-n", &ns, "--owner", "VirtualMachine/a/0"])
            .fails(code::INVALID)
            .run();
        assert!(ran.stderr.contains(&reserved), "{}", ran.stderr);

        let ran = ran
            .then()
            .args(["vpc", "create", "blue", "-n", &ns, "--cidr", "10.2.0.0/16"])
            .fails(code::INVALID)
            .run();
        assert!(ran.stderr.contains(&reserved), "{}", ran.stderr);

        let ran = ran
            .then()
            .args(["subnet", "create", "web", "--pool", "q", "-n", &ns])
            .args(["--cidr", "10.1.0.0/28"])
            .fails(code::INVALID)
            .run();
        assert!(ran.stderr.contains(&reserved), "{}", ran.stderr);

        // A batch line that names the namespace: that line fails with exit 2, and so
        // does the batch, having claimed nothing.
        let line = format!(r#"{{"pool":"q","namespace":"{ns}","owner":"VirtualMachine/a/0"}}"#);
        let before = ran.snapshot();
        let ran = ran
            .then()
            .args(["allocate", "-f", "-", "-o", "json"])
            .stdin(&format!("{line}\n"))
            .status(code::INVALID)
            .run();
        let result: serde_json::Value = serde_json::from_str(ran.stdout.trim())
            .unwrap_or_else(|e| panic!("one JSON line ({e}):\n{}", ran.stdout));
        assert_eq!(result["error"]["exit"], 2, "{}", ran.stdout);
        let message = result["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(&reserved), "{}", ran.stdout);
        assert_eq!(ran.snapshot(), before, "the batch wrote something");
    }
}

/// Pool `acme/p` (10.77.0.0/24) with a macPrefix, on the file store only if `file_only`.
fn acme_p(file_only: bool) -> Test {
    let t = Test::new("empty");
    let t = if file_only { t.file_store_only() } else { t };
    let p = pool("p", "acme", "10.77.0.0/24", "  macPrefix: '52:54:00'\n");
    let input = t.input("p.yaml", &p);
    t.args(["apply", "-f", &input]).run().then()
}

/// `VirtualMachine/vm-1/0` claims 10.77.0.1 of `acme/p` with `--mac auto`: on the file
/// store, its record is `namespaces/acme/macs/p-5254004d0001`.
fn claim_auto_mac(t: Test) -> Test {
    let t = t
        .args([
            "allocate",
            "p",
            "-n",
            "acme",
            "--owner",
            "VirtualMachine/vm-1/0",
        ])
        .args(["--mac", "auto"])
        .stdout("10.77.0.1\n")
        .run()
        .then();
    // The file store's record (a database keeps no such file).
    assert!(common::on_postgres() || t.exists("namespaces/acme/macs/p-5254004d0001"));
    t
}

/// The finding's repro: a namespace named like a MAC record of pool `acme/p` sat where the
/// record goes, and every `--mac auto` claim of the address it derives from failed with
/// exit 1, for good (one tenant denying another). The namespace is refused now, and the
/// claim is made.
#[test]
fn a_namespace_named_like_a_mac_record_is_refused_and_denies_no_claim() {
    let t = acme_p(false);
    let input = t.input(
        "q.yaml",
        &pool("q", "acme/macs/p-5254004d0001", "10.1.0.0/24", ""),
    );
    let ran = t.args(["apply", "-f", &input]).fails(code::INVALID).run();
    assert!(
        ran.stderr
            .contains("invalid namespace `acme/macs/p-5254004d0001`: segment `macs` is reserved"),
        "{}",
        ran.stderr
    );
    claim_auto_mac(ran.then());
}

/// A namespace made by hand inside a layout directory used to be skipped by `check` (and by
/// the pre-commit gate that runs it): an owner with two addresses there passed as ok. Each
/// such directory is now an error naming its path.
#[test]
fn check_names_a_namespace_made_by_hand_inside_a_layout_directory() {
    let t = claim_auto_mac(acme_p(true));
    // Beside acme's MAC records in namespaces/acme/macs/, a namespace `acme/macs` by hand
    // (and others in layout directories), whose owner holds two addresses of one pool.
    let planted = [
        ("namespaces/acme/macs", "acme/macs"),
        ("namespaces/macs", "macs"),
        ("namespaces/acme/ipampools/x", "acme/ipampools/x"),
        ("namespaces/acme/cooldown", "acme/cooldown"),
    ];
    for (dir, ns) in planted {
        t.write(
            &format!("{dir}/ipampools/q.yaml"),
            &pool("q", ns, "10.1.0.0/24", ""),
        );
        for addr in ["10.1.0.1", "10.1.0.2"] {
            t.write(
                &format!("{dir}/ipallocations/q-{}.yaml", addr.replace('.', "-")),
                &allocation(ns, "q", addr, "VirtualMachine/twice/0"),
            );
        }
    }
    let ran = t.args(["check"]).status(code::FAILURE).run();
    for (dir, ns) in planted {
        let named = ran
            .stdout
            .lines()
            .chain(ran.stderr.lines())
            .find(|l| l.contains(&format!("{dir}/")) && l.contains(&format!("`{ns}`")));
        assert!(
            named.is_some_and(|l| l.starts_with("error")),
            "no error names {dir}/ (namespace `{ns}`):\n{}{}",
            ran.stdout,
            ran.stderr
        );
    }
}

/// A database written by an ipamctl that did not reserve `macs` may hold a namespace
/// `acme/macs`, which no command can name now. `check --store` reports it as an error (it
/// skipped it: an owner there was never checked), and `export` says it leaves it out, so
/// that a state directory and a database never differ unseen; `import` refuses a state
/// directory with one.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_database_namespace_that_the_layout_reserves_is_reported_by_check_and_export() {
    let db = common::pg::Db::new();
    let tmp = tempfile::tempdir().unwrap();
    db.apply(tmp.path(), &pool("q", "acme/mac0", "10.1.0.0/24", ""));
    let ran = db.run([
        "allocate",
        "q",
        "-n",
        "acme/mac0",
        "--owner",
        "VirtualMachine/a/0",
    ]);
    assert!(ran.status.success(), "{}", common::pg::stderr(&ran));
    db.assert_check_clean();
    // As an older ipamctl would have written it: columns and manifests alike.
    let rename =
        "convert_to(replace(convert_from(manifest, 'UTF8'), 'acme/mac0', 'acme/macs'), 'UTF8')";
    db.sql()
        .batch_execute(&format!(
            "UPDATE ipamctl.pools SET namespace = 'acme/macs', manifest = {rename};
             UPDATE ipamctl.allocations SET namespace = 'acme/macs', manifest = {rename};
             UPDATE ipamctl.pool_counts SET namespace = 'acme/macs';
             UPDATE ipamctl.pool_hints SET namespace = 'acme/macs';"
        ))
        .unwrap();

    let check = db.run(["check"]);
    let shown = format!(
        "{}{}",
        common::pg::stdout(&check),
        common::pg::stderr(&check)
    );
    assert_eq!(check.status.code(), Some(code::FAILURE), "{shown}");
    for dir in ["ipampools", "ipallocations"] {
        assert!(
            shown.lines().any(|l| l.starts_with("error")
                && l.contains(&format!("namespaces/acme/macs/{dir}/"))
                && l.contains("segment `macs` is reserved")),
            "{shown}"
        );
    }

    // The other way: a state directory with such a namespace is not imported.
    let state = tmp.path().join("state");
    let init = std::process::Command::new(common::BIN)
        .args([std::ffi::OsStr::new("init"), state.as_os_str()])
        .output()
        .unwrap();
    assert!(init.status.success(), "{}", common::pg::stderr(&init));
    let dir = state.join("namespaces/acme/macs/ipampools");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("r.yaml"),
        pool("r", "acme/macs", "10.2.0.0/24", ""),
    )
    .unwrap();
    let import = db.run([std::ffi::OsStr::new("import"), state.as_os_str()]);
    let stderr = common::pg::stderr(&import);
    assert_eq!(import.status.code(), Some(code::INVALID), "{stderr}");
    assert!(
        stderr.contains("namespaces/acme/macs/ipampools/") && stderr.contains("nothing imported"),
        "{stderr}"
    );

    let out = tmp.path().join("exported");
    let export = db.run([std::ffi::OsStr::new("export"), out.as_os_str()]);
    let stderr = common::pg::stderr(&export);
    assert!(export.status.success(), "{stderr}");
    assert!(
        stderr.contains("`acme/macs`") && stderr.contains("not exported"),
        "{stderr}"
    );
    assert!(!out.join("namespaces/acme/macs").exists());
}
