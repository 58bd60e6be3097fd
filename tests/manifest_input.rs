//! What ipamctl agrees to read as a manifest: `apply -f` takes a regular file or stdin, and
//! refuses a directory, FIFO, socket or device at once; no manifest, given to `apply` or
//! found in the state directory, may carry a tag outside the YAML core schema.

mod common;

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, assert_one_error, code};

/// The `public-zone-a` pool of the seed fixture, as `apply` input.
const ZONE_A: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: public-zone-a
spec:
  cidr: 203.0.113.0/24
  kind: public
  gateway: 203.0.113.1
  exclude: [203.0.113.2, 203.0.113.3]
  zone: zone-a
";

/// A new public pool `edge`.
const EDGE: &str = "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: edge
  labels:
    team: net
spec:
  cidr: 192.0.2.0/24
  kind: public
";

/// Runs `cmd` (stdin closed) and kills it if it has not exited within 10 seconds: a
/// command that blocks on a special file must fail the test, not hang it.
fn run_with_deadline(mut cmd: Command) -> (i32, String, String) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl");
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for ipamctl") {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().expect("kill ipamctl");
            child.wait().expect("reap ipamctl");
            panic!("ipamctl still running after 10 s: it blocked on its input");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    let mut stderr = String::new();
    let mut out = child.stdout.take().expect("piped stdout");
    out.read_to_string(&mut stdout).expect("read stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    err.read_to_string(&mut stderr).expect("read stderr");
    (status.code().expect("exits by itself"), stdout, stderr)
}

/// `apply -f input` on the seed fixture must exit 2 at once with exactly `error: message`
/// and leave the state directory as it was.
#[track_caller]
fn assert_apply_refuses(test: &Test, input: &Path, message: &str) {
    let before = test.snapshot();
    let cmd = test.command(["apply".as_ref(), "-f".as_ref(), input.as_os_str()]);
    let (status, stdout, stderr) = run_with_deadline(cmd);
    assert_eq!(status, code::INVALID, "{stderr}");
    assert_eq!(stdout, "");
    assert_one_error(&stderr);
    assert_eq!(stderr, format!("error: {message}\n"));
    assert_eq!(test.snapshot(), before, "the state directory changed");
}

// --- `apply -f` of something that is not a regular file ----------------------------

/// What a FIFO given to `-f` is told, after its error line.
const FIFO_HINT: &str =
    "hint: to read from a pipe, give `-f -` and the pipe on stdin (`cmd | ipamctl … -f -`)";

#[test]
fn apply_of_a_directory_is_invalid_naming_it() {
    let test = Test::new("seed");
    std::fs::create_dir(test.root().join("pools")).expect("mkdir");
    assert_apply_refuses(
        &test,
        Path::new("pools"),
        "pools: is a directory, not a regular file",
    );
}

#[test]
fn apply_of_a_fifo_without_a_writer_is_refused_without_blocking() {
    let test = Test::new("seed");
    let fifo = test.root().join("pools.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    assert_apply_refuses(
        &test,
        Path::new("pools.fifo"),
        &format!("pools.fifo: is a FIFO, not a regular file\n{FIFO_HINT}"),
    );
}

#[test]
fn apply_of_a_unix_socket_is_refused() {
    let test = Test::new("seed");
    let _listener = std::os::unix::net::UnixListener::bind(test.root().join("agent.sock"))
        .expect("bind a unix socket");
    assert_apply_refuses(
        &test,
        Path::new("agent.sock"),
        "agent.sock: is a socket, not a regular file",
    );
}

#[test]
fn apply_of_a_character_device_is_refused_unread() {
    let test = Test::new("seed");
    assert_apply_refuses(
        &test,
        Path::new("/dev/zero"),
        "/dev/zero: is a character device, not a regular file",
    );
}

#[test]
fn apply_of_a_symlink_to_a_regular_file_reads_the_file() {
    // `-f` is the user's own path: a symlink is followed, and its target checked.
    let test = Test::new("empty");
    test.input("edge.yaml", EDGE);
    std::os::unix::fs::symlink("edge.yaml", test.root().join("link.yaml")).expect("symlink");
    test.args(["apply", "-f", "link.yaml"])
        .stdout("ipampool/edge created\n")
        .run();
}

#[test]
fn apply_of_a_symlink_to_a_fifo_is_refused() {
    let test = Test::new("seed");
    let made = Command::new("mkfifo")
        .arg(test.root().join("pools.fifo"))
        .status()
        .expect("run mkfifo");
    assert!(made.success(), "mkfifo failed");
    std::os::unix::fs::symlink("pools.fifo", test.root().join("link.yaml")).expect("symlink");
    assert_apply_refuses(
        &test,
        Path::new("link.yaml"),
        &format!("link.yaml: is a FIFO, not a regular file\n{FIFO_HINT}"),
    );
}

#[test]
fn apply_of_a_regular_file_over_16_mib_is_still_invalid() {
    let test = Test::new("seed");
    let name = test.input("huge.yaml", &"#".repeat((16 << 20) + 1));
    test.args(["apply", "-f", &name])
        .stderr("error: huge.yaml: is larger than 16777216 bytes\n")
        .fails(code::INVALID)
        .run();
}

#[test]
fn apply_still_reads_stdin_for_dash() {
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(EDGE)
        .stdout("ipampool/edge created\n")
        .run();
}

// --- tags --------------------------------------------------------------------------

/// The refusal of `tag` on line `line`, column `column`, of document 1 of `file`.
fn tag_error(file: &str, line: usize, column: usize, tag: &str) -> String {
    format!(
        "error: {file}: document 1: line {line} column {column}: tag `{tag}` is not allowed; \
         only the YAML core schema's tags are (!!str, !!int, !!float, !!bool, !!null, !!map, \
         !!seq)\n"
    )
}

/// `apply -f -` of `EDGE` with `from` replaced by `to` must be refused naming `tag` at
/// line `line`, column `column`, and write nothing.
#[track_caller]
fn assert_tag_refused(from: &str, to: &str, tag: &str, line: usize, column: usize) {
    assert!(EDGE.contains(from), "{from:?} is not in the input");
    Test::new("seed")
        .args(["apply", "-f", "-"])
        .stdin(&EDGE.replace(from, to))
        .stderr(&tag_error("<stdin>", line, column, tag))
        .fails(code::INVALID)
        .run();
}

#[test]
fn apply_refuses_a_binary_tag_on_a_string_field() {
    // `ZWRnZQ==` is base64 for `edge`: today's reader would take it as the name.
    assert_tag_refused("name: edge", "name: !!binary ZWRnZQ==", "!!binary", 4, 9);
}

#[test]
fn apply_refuses_yaml_1_1_tags_outside_the_core_schema() {
    assert_tag_refused(
        "team: net",
        "team: !!timestamp 2001-12-14",
        "!!timestamp",
        6,
        11,
    );
    assert_tag_refused("  labels:\n", "  labels: !!set\n", "!!set", 5, 11);
    assert_tag_refused("  labels:\n", "  labels: !!omap\n", "!!omap", 5, 11);
    assert_tag_refused("team: net", "team: !!merge net", "!!merge", 6, 11);
}

#[test]
fn apply_refuses_local_verbatim_and_non_specific_tags() {
    assert_tag_refused("team: net", "team: !foo net", "!foo", 6, 11);
    assert_tag_refused(
        "team: net",
        "team: !<tag:example.com,2000:app/net> net",
        "!<tag:example.com,2000:app/net>",
        6,
        11,
    );
    assert_tag_refused("team: net", "team: ! net", "!", 6, 11);
    assert_tag_refused("spec:\n", "spec: !spec\n", "!spec", 7, 7);
}

#[test]
fn apply_refuses_a_tag_on_a_key() {
    assert_tag_refused("team: net", "!foo team: net", "!foo", 6, 5);
}

#[test]
fn apply_names_the_tag_in_a_later_document_by_its_stream_line() {
    let input = format!(
        "{ZONE_A}---\n{}",
        EDGE.replace("team: net", "team: !foo net")
    );
    let ran = Test::new("seed")
        .args(["apply", "-f", "-"])
        .stdin(&input)
        .fails(code::INVALID)
        .run();
    assert_eq!(
        ran.stderr,
        tag_error("<stdin>", 17, 11, "!foo").replace("document 1", "document 2")
    );
}

#[test]
fn apply_accepts_core_schema_tags_as_if_untagged() {
    let untagged = EDGE
        .replace(
            "  labels:",
            "  ownerRefs: [{kind: VPC, uid: 7d1c0a8e-5b7f-4a1e-9a39-2f0c1f7e9b10, controller: true}]\n  labels:",
        )
        .replace("kind: public\n", "kind: public\n  exclude: [192.0.2.9]\n");
    let tagged = untagged
        .replace("metadata:", "metadata: !!map")
        .replace("name: edge", "name: !!str edge")
        .replace("team: net", "team: !<tag:yaml.org,2002:str> net")
        .replace("controller: true", "controller: !!bool true")
        .replace("exclude: [", "exclude: !!seq [")
        .replace("kind: public\n", "kind: public\n  zone: !!null\n");
    let written = |input: &str| {
        Test::new("empty")
            .args(["apply", "-f", "-"])
            .stdin(input)
            .stdout("ipampool/edge created\n")
            .run()
            .read("cluster/ipampools/edge.yaml")
    };
    assert_eq!(written(&tagged), written(&untagged));
}

#[test]
fn apply_is_not_fooled_by_tags_in_quotes_comments_or_block_scalars() {
    let input = EDGE
        .replace(
            "    team: net\n",
            "    team: net # !!binary ZWRnZQ==\n  annotations:\n    a: \"!!binary x\"\n    b: '!foo'\n    c: |\n      !!set\n    d: x!y\n",
        )
        .replace("spec:", "# !foo on its own line\nspec:");
    Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&input)
        .stdout("ipampool/edge created\n")
        .run();
}

// --- tags in the state directory ---------------------------------------------------

#[test]
fn a_stored_pool_with_a_binary_tag_is_invalid_naming_its_file() {
    let test = Test::new("seed").file_store_only();
    let stored = test
        .read("cluster/ipampools/public-zone-a.yaml")
        .replace("name: public-zone-a", "name: !!binary cHVibGljLXpvbmUtYQ==");
    test.write("cluster/ipampools/public-zone-a.yaml", &stored);
    let input = test.input("zone-a.yaml", ZONE_A);
    test.args(["apply", "-f", &input])
        .stderr(
            "error: cluster/ipampools/public-zone-a.yaml: line 4 column 9: tag `!!binary` is \
             not allowed; only the YAML core schema's tags are (!!str, !!int, !!float, !!bool, \
             !!null, !!map, !!seq)\n",
        )
        .fails(code::INVALID)
        .run();
}

#[test]
fn a_stored_allocation_with_a_custom_tag_reads_as_unparsable() {
    let test = Test::new("populated").file_store_only();
    let rel = "namespaces/acme/prod/ipallocations/vpc-main-10-42-0-2.yaml";
    let stored = test.read(rel);
    assert!(stored.contains("  pool: vpc-main\n"), "{stored}");
    test.write(
        rel,
        &stored.replace("  pool: vpc-main\n", "  pool: !pool vpc-main\n"),
    );
    let ran = test
        .args(["check", "-o", "json"])
        .status(code::FAILURE)
        .unchanged()
        .run();
    let findings = serde_json::Value::from(common::list_items(&ran.stdout));
    let line = stored
        .lines()
        .position(|l| l == "  pool: vpc-main")
        .expect("the pool line")
        + 1;
    assert_eq!(
        findings,
        serde_json::json!([{
            "severity": "error",
            "path": rel,
            "message": format!(
                "line {line} column 9: tag `!pool` is not allowed; only the YAML core schema's \
                 tags are (!!str, !!int, !!float, !!bool, !!null, !!map, !!seq)"
            ),
        }])
    );
}
