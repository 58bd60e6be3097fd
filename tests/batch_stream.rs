//! `allocate -f` streams, which is what keeps its memory bounded whatever the number of
//! requests (`bench/batch-memory` measures it): every output format prints before the input
//! ends, and a YAML list is read item by item after it was checked whole, up to the 64 MiB
//! the README allows (the YAML library's own budget refused a list of 40,000 requests).
//! Each through the real binary on the file store.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use common::{Test, code};
use serde_json::Value;

/// The README's limit of a batch's YAML list.
const LIST_LIMIT: usize = 64 << 20;

/// A YAML list of `n` requests for `vpc-main` in `acme/prod`, three lines each (item `i` on
/// line `3i + 1`), whose owners name no kind: each request fails alone (exit 2) before it
/// reaches the store, so that 40,000 of them run in seconds. About 57 bytes a request, as
/// in the issue (40,000 in 1.8 MB).
fn kindless_requests(n: usize) -> String {
    let mut text = String::with_capacity(n * 60);
    for i in 0..n {
        text.push_str(&format!(
            "- pool: vpc-main\n  namespace: acme/prod\n  owner: vm-{i:05}\n"
        ));
    }
    text
}

/// A request that claims an address: the one a refused list must not have run.
const CLAIM: &str = "- pool: vpc-main\n  namespace: acme/prod\n  owner: VirtualMachine/first/0\n";

/// The JSON lines of a batch's stdout.
fn results(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

#[test]
fn a_yaml_list_of_40000_requests_runs_every_one_of_them() {
    let t = Test::new("dual-stack");
    let mut text = kindless_requests(40_000);
    text.push_str("- pool: vpc-main\n  namespace: acme/prod\n  owner: VirtualMachine/last/0\n");
    assert!(text.len() > 1_800_000, "{} bytes", text.len());
    let file = t.input("requests.yaml", &text);
    let ran = t
        .args(["allocate", "-f", &file, "-o", "json"])
        .status(code::INVALID)
        .run();
    let got = results(&ran.stdout);
    assert_eq!(
        got.len(),
        40_001,
        "{}",
        ran.stderr.lines().next().unwrap_or("")
    );
    for (i, result) in got.iter().enumerate().take(40_000) {
        assert_eq!(result["index"], i);
        assert_eq!(result["line"], 3 * i + 1, "{result}");
        assert_eq!(result["error"]["exit"], code::INVALID, "{result}");
        assert_eq!(result["owner"], format!("vm-{i:05}"));
    }
    assert_eq!(got[40_000]["action"], "created", "{}", got[40_000]);
    assert_eq!(got[40_000]["address"], "10.42.0.1");
    assert_eq!(
        ran.stderr.lines().last(),
        Some("error: 40000 of 40001 requests failed (exit 2)")
    );
}

/// A list refused whole runs none of its requests, not even those before the reason: one
/// over the README's 64 MiB, one that stops parsing on its last line after 40,000 requests.
#[test]
fn a_yaml_list_refused_whole_claims_nothing_and_says_why_in_one_line() {
    let t = Test::new("dual-stack");
    let mut over = String::from(CLAIM);
    let comment = format!("# {}\n", "x".repeat(1000));
    while over.len() <= LIST_LIMIT {
        over.push_str(&comment);
    }
    over.push_str(CLAIM);
    let mut broken = String::from(CLAIM);
    broken.push_str(&kindless_requests(40_000));
    broken.push_str("- pool: [vpc-main\n");
    let cases = [
        (
            "over.yaml",
            over,
            "over.yaml: is larger than 67108864 bytes".to_owned(),
        ),
        (
            "broken.yaml",
            broken,
            "broken.yaml: line 120004 column 9: unclosed bracket".to_owned(),
        ),
    ];
    let mut t = t;
    for (name, text, why) in cases {
        let file = t.input(name, &text);
        let before = t.snapshot();
        let ran = t
            .args(["allocate", "-f", &file, "-o", "json"])
            .status(code::INVALID)
            .run();
        common::assert_one_error(&ran.stderr);
        assert!(ran.stderr.contains(&why), "{name}: {}", ran.stderr);
        assert_eq!(ran.stdout, "", "{name}");
        assert_eq!(ran.snapshot(), before, "{name}: the state changed");
        t = ran.then();
    }
}

/// An item larger than a request can be (over 1 MiB of text) is that request's failure
/// alone, as a line over 1 MiB is: read past without being kept, the items around it run.
#[test]
fn a_yaml_item_larger_than_a_request_fails_alone() {
    let t = Test::new("dual-stack");
    let mut text = String::from(CLAIM);
    text.push_str(&format!(
        "- pool: vpc-main\n  namespace: acme/prod\n  owner: VirtualMachine/{}/0\n",
        "x".repeat(2 << 20)
    ));
    text.push_str(&CLAIM.replace("first", "third"));
    let file = t.input("huge.yaml", &text);
    let ran = t
        .args(["allocate", "-f", &file, "-o", "json"])
        .status(code::INVALID)
        .run();
    let got = results(&ran.stdout);
    assert_eq!(got.len(), 3, "{}", ran.stderr);
    assert_eq!(got[0]["action"], "created");
    assert_eq!(got[1]["line"], 4);
    let why = got[1]["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.starts_with("huge.yaml: item 1 of the list is larger than a request can be"),
        "{why}"
    );
    assert_eq!(
        (&got[2]["line"], &got[2]["action"]),
        (&7.into(), &"created".into())
    );
}

/// A batch reading stdin, its three streams piped, and its stdout's lines as they come.
fn spawn(t: &Test, format: &[&str]) -> (Child, Receiver<String>) {
    let mut cmd: Command = t.command(["allocate", "-f", "-", "-n", "acme/prod"]);
    cmd.args(format)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn ipamctl");
    let stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stdout.lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

/// The next `n` lines of `lines`, waiting a minute at most for all of them.
fn next_lines(lines: &Receiver<String>, n: usize) -> Vec<String> {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        let left = Duration::from_secs(60).saturating_sub(start.elapsed());
        match lines.recv_timeout(left) {
            Ok(line) => got.push(line),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => panic!(
                "{} of {n} lines printed while the input stays open: {:?}",
                got.len(),
                got.last()
            ),
        }
    }
    got
}

/// What a batch prints is printed as it goes, in the table and YAML too, so that none of
/// it is held until the end: with the input still open, the first block of the table (1,000
/// rows under its header) and the first YAML item are out.
#[test]
fn the_table_and_the_yaml_list_of_a_batch_start_before_its_input_ends() {
    let t = Test::new("dual-stack");
    let request = |i: usize| format!(r#"{{"pool":"vpc-main","owner":"vm-{i:05}"}}"#);
    for (format, requests, printed) in [(&[][..], 1_000, 1_001), (&["-o", "yaml"][..], 1, 1)] {
        let (mut child, lines) = spawn(&t, format);
        let mut stdin = child.stdin.take().expect("piped stdin");
        for i in 0..requests {
            writeln!(stdin, "{}", request(i)).expect("write a request");
        }
        stdin.flush().expect("flush the requests");
        let first = next_lines(&lines, printed);
        // The input ends only now, after what it had was printed.
        writeln!(stdin, "{}", request(requests)).expect("write the last request");
        drop(stdin);
        let status = child.wait().expect("wait for the batch");
        assert_eq!(status.code(), Some(code::INVALID), "{format:?}");
        let rest: Vec<String> = lines.iter().collect();
        if format.is_empty() {
            assert!(first[0].starts_with("LINE  OWNER"), "{}", first[0]);
            assert!(first[1].starts_with("   1  vm-00000"), "{}", first[1]);
            assert!(first[1000].starts_with("1000  vm-00999"), "{}", first[1000]);
            assert_eq!(rest.len(), 1, "{rest:?}");
            assert!(rest[0].starts_with("1001  vm-01000"), "{}", rest[0]);
        } else {
            assert_eq!(first[0], "- index: 0");
            assert!(rest.contains(&"- index: 1".to_owned()), "{rest:?}");
        }
    }
}
