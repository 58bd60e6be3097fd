//! Concurrency smoke test: many `ipamctl allocate` processes started at once on one pool
//! never hand out an address twice, and one owner racing itself gets one address. (The deep
//! stress and crash proof lives in its own suite.)

mod common;

use std::collections::HashSet;
use std::process::{Child, Stdio};

use common::{Test, code};

/// Starts every command before waiting for any, then collects (exit code, stdout, stderr).
fn run_all(children: Vec<Child>) -> Vec<(i32, String, String)> {
    children
        .into_iter()
        .map(|child| {
            let output = child.wait_with_output().expect("wait for ipamctl");
            (
                output.status.code().expect("ipamctl exits by itself"),
                String::from_utf8_lossy(&output.stdout).into_owned(),
                String::from_utf8_lossy(&output.stderr).into_owned(),
            )
        })
        .collect()
}

fn spawn_allocate(test: &Test, owner: &str) -> Child {
    test.command(["allocate", "race", "--owner", owner])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl")
}

#[test]
fn thirty_two_owners_racing_for_a_slash_27_get_thirty_distinct_addresses() {
    // race is 10.7.0.0/27 without gateway: 30 candidates.
    let test = Test::new("race");
    let children = (0..32)
        .map(|i| spawn_allocate(&test, &format!("FloatingIP/fip-{i}")))
        .collect();
    let results = run_all(children);

    let won: Vec<&str> = results
        .iter()
        .filter(|(status, ..)| *status == code::OK)
        .map(|(_, stdout, _)| stdout.trim_end())
        .collect();
    let exhausted: Vec<&str> = results
        .iter()
        .filter(|(status, ..)| *status == code::EXHAUSTED)
        .map(|(.., stderr)| stderr.as_str())
        .collect();
    assert_eq!(won.len(), 30, "{results:#?}");
    assert_eq!(exhausted.len(), 2, "{results:#?}");
    for stderr in exhausted {
        assert!(
            stderr.starts_with("error: pool `race` is exhausted"),
            "{stderr}"
        );
    }
    let distinct: HashSet<&str> = won.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        30,
        "an address was handed out twice: {won:?}"
    );
    let expected: HashSet<String> = (1..=30).map(|i| format!("10.7.0.{i}")).collect();
    assert_eq!(
        distinct,
        expected.iter().map(String::as_str).collect::<HashSet<_>>()
    );

    // One file per winner, each naming the owner that was told its address.
    let files = test.files();
    let allocations: Vec<&String> = files
        .iter()
        .filter(|f| f.starts_with("cluster/ipallocations/"))
        .collect();
    assert_eq!(allocations.len(), 30, "{files:#?}");
    for (status, stdout, _) in &results {
        if *status != code::OK {
            continue;
        }
        let address = stdout.trim_end();
        let file = test.read(&format!(
            "cluster/ipallocations/race-{}.yaml",
            address.replace('.', "-")
        ));
        assert!(file.contains(&format!("address: \"{address}\"")), "{file}");
    }
    // Every owner that won appears exactly once.
    let owners: HashSet<String> = allocations
        .iter()
        .map(|f| {
            let text = test.read(f);
            text.lines()
                .find(|l| l.trim_start().starts_with("name: fip-"))
                .expect("an owner name")
                .trim()
                .to_owned()
        })
        .collect();
    assert_eq!(owners.len(), 30);
}

#[test]
fn sixteen_requests_for_one_owner_at_once_get_one_address() {
    let test = Test::new("race");
    let children = (0..16)
        .map(|_| spawn_allocate(&test, "VPC/router"))
        .collect();
    let results = run_all(children);

    for (status, _, stderr) in &results {
        assert_eq!(*status, code::OK, "{stderr}");
    }
    let printed: HashSet<&str> = results
        .iter()
        .map(|(_, stdout, _)| stdout.as_str())
        .collect();
    assert_eq!(printed.len(), 1, "{results:#?}");
    assert_eq!(printed.into_iter().next(), Some("10.7.0.1\n"));
    assert_eq!(
        test.files(),
        [
            "cluster/ipallocations/race-10-7-0-1.yaml",
            "cluster/ipampools/race.yaml",
        ]
    );
}
