//! The output contract, command by command and format by format: every command accepts
//! `-o table|wide|json|yaml|name` (or refuses one it has no form for, with exit 2); JSON is
//! exactly one document, a list being kubectl's `List`; YAML is the same data as JSON; `-o
//! name` lines are the `kind/name` of the objects the JSON holds; a changing command gives
//! each object a `status.action`; `--no-headers` drops a table's header line and nothing
//! else.
//!
//! The table of cases is checked against the subcommands clap knows, so a command added
//! without a case here fails this test.

mod common;

use std::collections::BTreeSet;
use std::process::Output;

use clap::CommandFactory;
use common::{Test, code, pg, uid};
use serde_json::Value;

/// What a command prints in JSON and YAML.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Shape {
    /// A kubectl `List` of objects, each named by `kind` and `metadata.name`.
    List,
    /// A `List` of findings (`check`): `-o name` prints their paths.
    Findings,
    /// One object, named by `kind` and `metadata.name` (or `name`).
    Object,
    /// One JSON document that is no object of ours (`schema`); `-o name` prints these lines.
    Document(&'static str),
    /// What a changing command did: objects with `status.action`, one alone (`true`) or a
    /// `List` (`false`).
    Changes(bool),
    /// A text format of its own (a shell script, Prometheus' exposition) or a file for
    /// another program (`dhcp export`, `dns export`): only the table form (the text itself,
    /// or the list of files written).
    Script,
    /// `diff`: one object whose `changes` name the objects.
    Diff,
}

/// Where a case runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    /// A copy of `testdata/<fixture>` (or nothing, for `init`).
    Dir(Option<&'static str>),
    /// A fresh PostgreSQL database with the schema.
    Database,
    /// A copy of `testdata/populated` committed to a new git repository, then one more
    /// claim (left untracked).
    Git,
    /// No state; a tokens file `tokens.yaml` holding the token `acme`.
    Tokens,
    /// A copy of `testdata/populated` where `FloatingIP/lease` holds a lease.
    Lease,
}

struct Case {
    /// The subcommand's path, as clap names it.
    command: &'static str,
    store: Store,
    args: Vec<String>,
    stdin: Option<&'static str>,
    shape: Shape,
    /// Exit status of a successful run (`check` exits 1 on findings).
    status: i32,
}

fn case(command: &'static str, store: Store, args: &[&str], shape: Shape) -> Case {
    Case {
        command,
        store,
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        stdin: None,
        shape,
        status: code::OK,
    }
}

fn cases() -> Vec<Case> {
    let populated = Store::Dir(Some("populated"));
    let seed = Store::Dir(Some("seed"));
    let demo = common::demo_pools();
    let demo = demo.to_str().expect("UTF-8 path");
    vec![
        case("init", Store::Dir(None), &["init"], Shape::Changes(true)),
        case(
            "apply",
            Store::Dir(Some("empty")),
            &["apply", "-f", demo],
            Shape::Changes(false),
        ),
        case(
            "allocate",
            populated,
            &["allocate", "public-zone-a", "--owner", "FloatingIP/new"],
            Shape::Changes(true),
        ),
        case(
            "release",
            populated,
            &["release", "--uid", uid::WEB01],
            Shape::Changes(false),
        ),
        case("list", populated, &["list"], Shape::List),
        case(
            "mac set",
            populated,
            &[
                "mac",
                "set",
                "vpc-main",
                "10.42.1.7",
                "-n",
                "acme/prod",
                "--owner",
                "Node/10.42.1.0/24",
                "--mac",
                "02:00:00:00:00:01",
            ],
            Shape::Changes(true),
        ),
        case("pool list", populated, &["pool", "list"], Shape::List),
        case(
            "pool show",
            populated,
            &["pool", "show", "vpc-main", "-n", "acme/prod"],
            Shape::Object,
        ),
        case(
            "pool create",
            seed,
            &[
                "pool",
                "create",
                "edge",
                "--cidr",
                "100.64.0.0/29",
                "--zone",
                "zone-b",
            ],
            Shape::Changes(true),
        ),
        case(
            "pool delete",
            seed,
            &["pool", "delete", "public-zone-a"],
            Shape::Changes(true),
        ),
        case(
            "subnet create",
            seed,
            &[
                "subnet",
                "create",
                "web",
                "-n",
                "acme/prod",
                "--pool",
                "vpc-main",
                "--cidr",
                "10.42.1.0/24",
            ],
            Shape::Changes(true),
        ),
        case(
            "subnet list",
            Store::Dir(Some("subnets")),
            &["subnet", "list"],
            Shape::List,
        ),
        case(
            "subnet show",
            Store::Dir(Some("subnets")),
            &["subnet", "show", "web", "-n", "acme/prod"],
            Shape::Object,
        ),
        case(
            "subnet delete",
            Store::Dir(Some("subnets")),
            &["subnet", "delete", "web", "-n", "acme/prod"],
            Shape::Changes(true),
        ),
        case(
            "vpc create",
            seed,
            &[
                "vpc",
                "create",
                "blue",
                "-n",
                "acme/test",
                "--cidr",
                "10.9.0.0/16",
                "--uid",
                "00000000-0000-4000-8000-000000000001",
            ],
            Shape::Changes(true),
        ),
        case(
            "quota list",
            Store::Dir(Some("quota")),
            &["quota", "list"],
            Shape::List,
        ),
        case(
            "vpc get",
            populated,
            &["vpc", "get", "main", "-n", "acme/prod"],
            Shape::Object,
        ),
        case("vpc list", populated, &["vpc", "list"], Shape::List),
        case(
            "token create",
            Store::Tokens,
            &[
                "token",
                "create",
                "beta",
                "--tokens",
                "tokens.yaml",
                "-n",
                "beta",
                "--verbs",
                "read",
            ],
            Shape::Script,
        ),
        case(
            "token list",
            Store::Tokens,
            &["token", "list", "--tokens", "tokens.yaml"],
            Shape::List,
        ),
        case(
            "token revoke",
            Store::Tokens,
            &["token", "revoke", "acme", "--tokens", "tokens.yaml"],
            Shape::Changes(true),
        ),
        // Its only output of its own: the schema's SDL (the server's answers are GraphQL's).
        case(
            "serve",
            Store::Dir(None),
            &["serve", "--print-schema"],
            Shape::Script,
        ),
        case(
            "renew",
            Store::Lease,
            &[
                "renew",
                "public-zone-a",
                "--owner",
                "FloatingIP/lease",
                "--ttl",
                "2h",
            ],
            Shape::Changes(true),
        ),
        case(
            "vpc delete",
            populated,
            &["vpc", "delete", "main", "-n", "acme/prod"],
            Shape::Changes(false),
        ),
        Case {
            stdin: Some("FloatingIP/fip-1\n"),
            // Leaks found: report mode is a CI gate, as `check` is.
            status: code::FAILURE,
            ..case(
                "reconcile",
                populated,
                &[
                    "reconcile",
                    "--live",
                    "-",
                    "--live-as-of",
                    "2026-12-01T07:00:00Z",
                    // Every kind judged: the owners of the other kinds leak.
                    "--all-kinds",
                ],
                Shape::List,
            )
        },
        case(
            "export",
            Store::Database,
            &["export", "exported"],
            Shape::Changes(true),
        ),
        case(
            "import",
            Store::Database,
            &["import", "IMPORTED"],
            Shape::Changes(true),
        ),
        Case {
            status: code::FAILURE,
            ..case(
                "check",
                Store::Dir(Some("broken-allocation")),
                &["check"],
                Shape::Findings,
            )
        },
        Case {
            status: code::FAILURE,
            ..case("diff", Store::Git, &["diff"], Shape::Diff)
        },
        case(
            "history",
            Store::Git,
            &["history", "--uid", uid::WEB01],
            Shape::List,
        ),
        case("report", populated, &["report"], Shape::List),
        Case {
            // A lease of an address nobody holds: drift, exit 1 as `check`'s findings.
            stdin: Some("4102444800 52:54:00:00:00:99 203.0.113.200 guest *\n"),
            status: code::FAILURE,
            ..case(
                "dhcp leases",
                populated,
                &["dhcp", "leases", "--format", "dnsmasq", "-"],
                Shape::List,
            )
        },
        case(
            "schema",
            Store::Dir(None),
            &["schema"],
            Shape::Document(
                "schema/ipampool\nschema/ipallocation\nschema/subnet\nschema/cooldownrecord\nschema/ipprefixclaim\nschema/quota\n",
            ),
        ),
        case("metrics", populated, &["metrics"], Shape::Script),
        case(
            "completions",
            Store::Dir(None),
            &["completions", "bash"],
            Shape::Script,
        ),
        // Files for other programs (a Kea or dnsmasq configuration, zone files): one form.
        case(
            "dhcp export",
            populated,
            &["dhcp", "export", "--format", "dnsmasq"],
            Shape::Script,
        ),
        case(
            "dns export",
            populated,
            &[
                "dns",
                "export",
                "--zone",
                "lab.example.com",
                "--out",
                "zones",
                "--ns",
                "ns1.example.net",
            ],
            Shape::Script,
        ),
    ]
}

/// Every leaf subcommand clap knows, as `pool list`.
fn leaves(cmd: &clap::Command, prefix: &str, out: &mut BTreeSet<String>) {
    for sub in cmd.get_subcommands() {
        let name = format!("{prefix}{}", sub.get_name());
        if sub.get_name() == "help" {
            continue;
        }
        if sub.has_subcommands() {
            leaves(sub, &format!("{name} "), out);
        } else {
            out.insert(name);
        }
    }
}

#[test]
fn every_command_has_a_case() {
    let mut known = BTreeSet::new();
    let mut cli = ipamctl::cli::Cli::command();
    // The subcommands are deferred (`cli/args.rs`): built, the tree has them all.
    cli.build();
    leaves(&cli, "", &mut known);
    let covered: BTreeSet<String> = cases().iter().map(|c| c.command.to_owned()).collect();
    assert_eq!(
        known, covered,
        "every subcommand needs a case in tests/output_contract.rs"
    );
}

/// Runs a case with `extra` arguments on a fresh store; returns its output.
fn run(case: &Case, extra: &[&str]) -> (i32, String, String) {
    let mut args = case.args.clone();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    match case.store {
        Store::Dir(fixture) => {
            let test = match fixture {
                Some(f) => Test::new(f),
                None => Test::without_state(),
            };
            finish(test.command(&args), case.stdin)
        }
        Store::Git => {
            let test = Test::new("populated");
            let git = |args: &[&str]| {
                let out = std::process::Command::new("git")
                    .args(args)
                    .current_dir(test.state())
                    .env("GIT_CONFIG_GLOBAL", "/dev/null")
                    .env("GIT_AUTHOR_NAME", "Ada")
                    .env("GIT_AUTHOR_EMAIL", "ada@example.org")
                    .env("GIT_COMMITTER_NAME", "Ada")
                    .env("GIT_COMMITTER_EMAIL", "ada@example.org")
                    // The same commit id on every run: the formats are compared.
                    .env("GIT_AUTHOR_DATE", "2026-01-02T03:04:05Z")
                    .env("GIT_COMMITTER_DATE", "2026-01-02T03:04:05Z")
                    .output()
                    .expect("run git");
                assert!(out.status.success(), "git {args:?}");
            };
            git(&["init", "-q"]);
            git(&["add", "-A"]);
            git(&["commit", "-q", "-m", "populated"]);
            let claim = test
                .command(["allocate", "public-zone-a", "--owner", "FloatingIP/new"])
                .output()
                .expect("run ipamctl");
            assert!(claim.status.success());
            finish(test.command(&args), case.stdin)
        }
        Store::Lease => {
            let test = Test::new("populated");
            let claim = test
                .command([
                    "allocate",
                    "public-zone-a",
                    "--owner",
                    "FloatingIP/lease",
                    "--ttl",
                    "1h",
                ])
                .output()
                .expect("run ipamctl");
            assert!(claim.status.success(), "{claim:?}");
            finish(test.command(&args), case.stdin)
        }
        Store::Tokens => {
            let test = Test::without_state();
            let made = test
                .command([
                    "token",
                    "create",
                    "acme",
                    "--tokens",
                    "tokens.yaml",
                    "-n",
                    "acme/*",
                    "--verbs",
                    "read,claim",
                ])
                .output()
                .expect("run ipamctl");
            assert!(made.status.success(), "{made:?}");
            finish(test.command(&args), case.stdin)
        }
        Store::Database => {
            let db = pg::Db::new();
            let dir = tempfile::tempdir().expect("a temporary directory");
            let source = dir.path().join("source");
            common::copy_tree(&common::fixture("populated"), &source);
            if case.command == "export" {
                let import = db.run(["import", source.to_str().expect("UTF-8 path")]);
                assert!(import.status.success(), "{}", pg::stderr(&import));
            }
            let args: Vec<String> = args
                .iter()
                .map(|a| a.replace("IMPORTED", source.to_str().expect("UTF-8 path")))
                .collect();
            let mut cmd = db.cmd(&args);
            cmd.current_dir(dir.path());
            finish(cmd, None)
        }
    }
}

fn finish(mut cmd: std::process::Command, stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write;
    cmd.stdin(if stdin.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    })
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ipamctl");
    if let Some(text) = stdin {
        child
            .stdin
            .take()
            .expect("piped")
            .write_all(text.as_bytes())
            .expect("write stdin");
    }
    let out: Output = child.wait_with_output().expect("wait for ipamctl");
    (
        out.status.code().expect("exited by itself"),
        String::from_utf8(out.stdout).expect("UTF-8 stdout"),
        String::from_utf8(out.stderr).expect("UTF-8 stderr"),
    )
}

/// `kind/name` of an object as JSON shows it.
fn resource(object: &Value) -> String {
    // What happened to an object (a history entry, a diff's change) names it itself.
    if let Some(object) = object["object"].as_str() {
        return object.to_owned();
    }
    let kind = object["kind"].as_str().expect("an object has a kind");
    let name = object["metadata"]["name"]
        .as_str()
        .or_else(|| object["name"].as_str())
        .expect("an object has a name");
    format!("{}/{name}", kind.to_lowercase())
}

/// The objects a JSON document of `shape` holds.
fn objects(shape: Shape, json: &Value, what: &str) -> Vec<Value> {
    let listed = || {
        assert_eq!(json["apiVersion"], "v1", "{what}: not a List: {json}");
        assert_eq!(json["kind"], "List", "{what}: not a List: {json}");
        json["items"].as_array().expect("items").clone()
    };
    match shape {
        Shape::List | Shape::Findings | Shape::Changes(false) => listed(),
        Shape::Object | Shape::Document(_) | Shape::Changes(true) => {
            assert!(json.is_object(), "{what}: not one object: {json}");
            vec![json.clone()]
        }
        Shape::Diff => {
            assert!(json["base"].is_string(), "{what}: not a diff: {json}");
            json["changes"].as_array().expect("changes").clone()
        }
        Shape::Script => unreachable!("a script has no JSON"),
    }
}

/// `value` with every RFC 3339 instant to the second (`2026-12-07T02:15:00Z`) made `[TIME]`.
fn at_any_time(value: Value) -> Value {
    match value {
        Value::String(s) if is_instant(&s) => Value::String("[TIME]".into()),
        Value::Array(items) => Value::Array(items.into_iter().map(at_any_time).collect()),
        Value::Object(map) => {
            Value::Object(map.into_iter().map(|(k, v)| (k, at_any_time(v))).collect())
        }
        other => other,
    }
}

#[test]
fn every_command_keeps_the_output_contract_in_every_format() {
    for case in cases() {
        let what = case.command;
        // `export` and `import` need a database; the others run on every machine.
        if case.store == Store::Database && !cfg!(has_postgres) {
            eprintln!("skipped `{what}`: needs PostgreSQL");
            continue;
        }
        if case.shape == Shape::Script {
            let (status, stdout, _) = run(&case, &["-o", "table"]);
            assert_eq!(status, code::OK, "{what} -o table");
            assert!(
                stdout.starts_with("_ipamctl()") || !stdout.is_empty(),
                "{what}"
            );
            for format in ["json", "yaml", "name"] {
                let (status, stdout, stderr) = run(&case, &["-o", format]);
                assert_eq!(status, code::INVALID, "{what} -o {format}: {stderr}");
                assert_eq!(stdout, "", "{what} -o {format}");
                common::assert_one_error(&stderr);
            }
            continue;
        }
        let data = |format: &str| {
            let (status, stdout, stderr) = run(&case, &["-o", format]);
            assert_eq!(status, case.status, "{what} -o {format}: {stderr}");
            if case.status == code::OK {
                assert!(!stderr.contains("error:"), "{what} -o {format}: {stderr}");
            }
            // Each format runs on its own copy of the state, so a claim's time can differ
            // by a second between them.
            common::redact_time(&stdout)
        };
        // JSON: exactly one document (nothing else on stdout), of the command's shape.
        let json_text = data("json");
        let json: Value = serde_json::from_str(&json_text).unwrap_or_else(|e| {
            panic!("{what} -o json is not one JSON document ({e}):\n{json_text}")
        });
        let items = objects(case.shape, &json, what);
        if let Shape::Changes(_) = case.shape {
            for item in &items {
                assert!(
                    item["status"]["action"].is_string(),
                    "{what}: no status.action in {item}"
                );
            }
        }
        // YAML: the same data.
        let yaml_text = data("yaml");
        let yaml: Value = serde_saphyr::from_str(&yaml_text)
            .unwrap_or_else(|e| panic!("{what} -o yaml does not parse ({e}):\n{yaml_text}"));
        // Each format is its own run: an instant the command stamps (a token's revocation)
        // may fall in another second.
        assert_eq!(
            at_any_time(yaml),
            at_any_time(json.clone()),
            "{what}: -o yaml and -o json disagree"
        );
        // Names: one line per object, `kind/name` (a finding: its path).
        let names = data("name");
        let expected: Vec<String> = match case.shape {
            Shape::Findings => {
                let mut paths: Vec<String> = items
                    .iter()
                    .map(|f| f["path"].as_str().expect("a path").to_owned())
                    .collect();
                paths.dedup();
                paths
            }
            Shape::Document(names) => names.lines().map(str::to_owned).collect(),
            _ => items.iter().map(resource).collect(),
        };
        let printed: Vec<&str> = names.lines().collect();
        assert_eq!(printed, expected, "{what} -o name");
        assert!(
            !expected.is_empty(),
            "{what}: the case shows nothing; pick one that does"
        );
        // Tables: something to read; `--no-headers` drops the header line alone.
        for format in ["table", "wide"] {
            let table = data(format);
            assert!(!table.is_empty(), "{what} -o {format} printed nothing");
            let (status, bare, stderr) = run(&case, &["-o", format, "--no-headers"]);
            assert_eq!(status, case.status, "{what} --no-headers: {stderr}");
            let first = table.lines().next().unwrap_or_default();
            let has_header =
                first.chars().any(|c| c.is_ascii_uppercase()) && first == first.to_uppercase();
            // Columns are as wide as their cells: without the header, some may narrow. Each
            // run is its own setup, so an instant it stamps (a token's creation) may fall in
            // another second: a timestamp is compared as one.
            let words = |text: &str| -> Vec<Vec<String>> {
                text.lines()
                    .map(|l| l.split_whitespace().map(any_instant).collect())
                    .collect()
            };
            if has_header {
                assert_eq!(
                    words(&bare),
                    words(table.split_once('\n').map_or("", |(_, rest)| rest)),
                    "{what} -o {format} --no-headers"
                );
            } else {
                assert_eq!(
                    bare, table,
                    "{what}: --no-headers changed a headerless form"
                );
            }
        }
    }
}

#[test]
fn allocate_and_vpc_create_print_the_value_alone_without_dash_o() {
    Test::new("seed")
        .args(["allocate", "public-zone-a", "--owner", "FloatingIP/new"])
        .stdout("203.0.113.4\n")
        .run();
    Test::new("seed")
        .args([
            "vpc",
            "create",
            "blue",
            "-n",
            "acme/test",
            "--cidr",
            "10.9.0.0/16",
            "--uid",
            "00000000-0000-4000-8000-000000000001",
        ])
        .stdout("00000000-0000-4000-8000-000000000001\n")
        .stderr("ipampool/vpc-blue created\n")
        .run();
}

#[test]
fn dry_runs_print_what_would_change_and_write_nothing() {
    let demo = common::demo_pools();
    let demo = demo.to_str().expect("UTF-8 path");
    let dry = [
        (
            "empty",
            vec!["apply", "-f", demo, "--dry-run"],
            "ipampool/public-zone-a would-create\nipampool/vpc-main would-create\n",
        ),
        (
            "seed",
            vec!["pool", "delete", "public-zone-a", "--dry-run"],
            "ipampool/public-zone-a would-delete\n",
        ),
        (
            "seed",
            vec![
                "vpc",
                "create",
                "b",
                "-n",
                "t",
                "--cidr",
                "10.9.0.0/16",
                "--uid",
                "00000000-0000-4000-8000-000000000002",
                "--dry-run",
            ],
            "00000000-0000-4000-8000-000000000002\n",
        ),
        (
            "populated",
            vec!["release", "--kind", "FloatingIP", "--dry-run"],
            "ipallocation/public-zone-a-203-0-113-4 would-release\n",
        ),
        (
            "seed",
            vec![
                "allocate",
                "public-zone-a",
                "--owner",
                "FloatingIP/x",
                "--dry-run",
            ],
            "203.0.113.4\n",
        ),
    ];
    for (fixture, args, stdout) in dry {
        Test::new(fixture)
            .args(&args)
            .stdout(stdout)
            .unchanged()
            .run();
        let mut json = args.clone();
        json.extend(["-o", "json"]);
        let ran = Test::new(fixture).args(&json).unchanged().run();
        assert!(
            ran.stdout.contains("\"action\": \"would-"),
            "{args:?}: {}",
            ran.stdout
        );
    }
    // A dry run of a pool delete that would be refused is refused the same way.
    Test::new("populated")
        .args(["pool", "delete", "vpc-dev", "-n", "acme/dev", "--dry-run"])
        .fails(code::CONFLICT)
        .run();
}

/// Whether `s` is an RFC 3339 timestamp in UTC to the second (`2026-12-07T08:45:30Z`).
fn is_instant(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && b[19] == b'Z'
        && b[10] == b'T'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16 | 19) || c.is_ascii_digit())
}

/// `word`, or `[TIME]` when it is a timestamp ([`is_instant`]).
fn any_instant(word: &str) -> String {
    if is_instant(word) {
        "[TIME]".to_owned()
    } else {
        word.to_owned()
    }
}
