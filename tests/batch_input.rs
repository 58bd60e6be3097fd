//! `allocate -f` at the edges of its input and output: a reader that closes stdout early, a
//! signal while the batch waits for its next line, a line over the limit, requests whose
//! fields contradict each other. Each through the real binary on the file store.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use common::{Test, code};
use serde_json::Value;

/// The JSON lines of a batch's stdout.
fn results(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A batch reading stdin, printing JSON lines, its three streams piped.
fn spawn_batch(t: &Test) -> Child {
    spawn_batch_with(t, &["-o", "json"])
}

/// A batch reading stdin with `extra` arguments, its three streams piped.
fn spawn_batch_with(t: &Test, extra: &[&str]) -> Child {
    let mut cmd: Command = t.command(["allocate", "-f", "-", "-n", "acme/prod"]);
    cmd.args(extra);
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl")
}

/// A batch on stdin that has claimed web-01's address and printed its result; its stdin and
/// stdout for what comes next.
fn one_claim_made(t: &Test) -> (Child, ChildStdin, BufReader<ChildStdout>) {
    let mut child = spawn_batch(t);
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"pool":"vpc-main","owner":"VirtualMachine/web-01/0"}}"#
    )
    .unwrap();
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    assert!(first.contains(r#""action":"created""#), "{first}");
    (child, stdin, stdout)
}

/// Waits for `child` at most a minute (a batch that waits for ever fails the test instead
/// of hanging it); returns its exit code and stderr.
fn wait_bounded(mut child: Child) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait for ipamctl") {
            return (status.code(), read_all(child.stderr.take()));
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the batch did not end within a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What is left to read of a child's stream.
fn read_all(stream: Option<impl std::io::Read>) -> String {
    let mut text = String::new();
    if let Some(mut stream) = stream {
        stream
            .read_to_string(&mut text)
            .expect("read a child's output");
    }
    text
}

/// Sends SIGTERM to `child`.
fn terminate(child: &Child) {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
}

/// Every allocation of the state directory, one a line with its owner.
fn holders(t: &Test) -> String {
    let out = t
        .command(["list", "-A", "-o", "wide"])
        .output()
        .expect("run list");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn a_batch_whose_stdout_is_closed_stops_there_with_exit_1_not_0() {
    let t = Test::new("dual-stack");
    let (child, mut stdin, stdout) = one_claim_made(&t);
    // The reader goes away (`| head -1`): the requests after it must not run unseen, not
    // the one that would fail (its address is held) nor the one that would claim.
    drop(stdout);
    writeln!(
        stdin,
        r#"{{"pool":"vpc-main","owner":"VirtualMachine/x/0","address":"10.42.0.1"}}"#
    )
    .unwrap();
    writeln!(
        stdin,
        r#"{{"pool":"vpc-main","owner":"VirtualMachine/web-03/0"}}"#
    )
    .unwrap();
    drop(stdin);
    let (status, stderr) = wait_bounded(child);
    // Exit 0 would say every request succeeded: two never ran.
    assert_eq!(status, Some(code::FAILURE), "{stderr}");
    common::assert_one_error(&stderr);
    assert!(
        stderr.contains("after 1 of the batch's requests"),
        "{stderr}"
    );
    let held = holders(&t);
    assert!(held.contains("VirtualMachine/web-01/0"), "{held}");
    assert!(!held.contains("VirtualMachine/web-03/0"), "{held}");
}

#[test]
fn sigterm_while_a_batch_waits_for_its_next_line_stops_it_with_exit_130() {
    let t = Test::new("dual-stack");
    let (child, stdin, _stdout) = one_claim_made(&t);
    // The writer keeps the pipe open and sends nothing more: the signal alone must end it.
    terminate(&child);
    let (status, stderr) = wait_bounded(child);
    drop(stdin);
    assert_eq!(status, Some(130), "{stderr}");
    assert!(
        stderr.contains("stopped after 1 of the batch's requests"),
        "{stderr}"
    );
    assert!(holders(&t).contains("VirtualMachine/web-01/0"));
}

#[test]
fn a_line_over_the_limit_is_one_failed_request_and_the_lines_after_it_keep_their_numbers() {
    let t = Test::new("dual-stack");
    // Line 2 is a valid request padded past 1 MiB; line 4 is not UTF-8.
    let padded = format!(
        r#"{{"pool":"vpc-main","owner":"VirtualMachine/long/0"{}}}"#,
        " ".repeat(3 << 20)
    );
    let mut text = Vec::new();
    text.extend_from_slice(b"{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/a/0\"}\n");
    text.extend_from_slice(padded.as_bytes());
    text.extend_from_slice(b"\n{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/b/0\"}\n");
    text.extend_from_slice(b"{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/\xff/0\"}\n");
    text.extend_from_slice(b"{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/c/0\"}\n");
    let file = t.path("requests.jsonl");
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod", "-o", "json"])
        .status(code::INVALID)
        .run();
    let got = results(&ran.stdout);
    // One result per line, each named by its own index and line.
    assert_eq!(got.len(), 5, "{}", ran.stdout);
    for (i, r) in got.iter().enumerate() {
        assert_eq!(r["index"], i, "{r}");
        assert_eq!(r["line"], i + 1, "{r}");
    }
    let failed: Vec<bool> = got.iter().map(|r| r.get("error").is_some()).collect();
    assert_eq!(failed, [false, true, false, true, false], "{}", ran.stdout);
    assert!(
        got[1]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("longer than")),
        "{}",
        got[1]
    );
    assert_eq!(got[4]["owner"], "VirtualMachine/c/0");
}

#[test]
fn requests_whose_fields_contradict_or_are_empty_fail_alone_and_claim_nothing() {
    let t = Test::new("dual-stack");
    let before = t.snapshot();
    let lines = [
        // Which is it: one pool, or two (dual stack)?
        r#"{"pool":"vpc-main","pools":["vpc-main-v6"],"owner":"VirtualMachine/a/0"}"#,
        r#"{"pool":"vpc-main","subnet":"web","subnets":["app"],"owner":"VirtualMachine/b/0"}"#,
        // An empty list is no value: not "any address".
        r#"{"pool":"vpc-main","address":[],"owner":"VirtualMachine/c/0"}"#,
        r#"{"pool":"vpc-main","mac":[],"owner":"VirtualMachine/d/0"}"#,
        // A required flag left out: the message names it.
        r#"{"pool":"vpc-main"}"#,
        // Whose is it? (JSON parsers keep the last; the YAML form refuses it.)
        r#"{"pool":"vpc-main","owner":"VirtualMachine/e/0","owner":"VirtualMachine/f/0"}"#,
    ];
    let file = t.input("contradict.jsonl", &(lines.join("\n") + "\n"));
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod", "-o", "json"])
        .status(code::INVALID)
        .run();
    let got = results(&ran.stdout);
    assert_eq!(got.len(), lines.len(), "{}", ran.stdout);
    for r in &got {
        assert_eq!(r["error"]["exit"], 2, "{r}");
    }
    let message = |i: usize| got[i]["error"]["message"].as_str().unwrap().to_owned();
    assert!(message(0).contains("`pool` and `pools`"), "{}", message(0));
    assert!(
        message(1).contains("`subnet` and `subnets`"),
        "{}",
        message(1)
    );
    assert!(
        message(2).contains("`address` is an empty list"),
        "{}",
        message(2)
    );
    assert!(
        message(3).contains("`mac` is an empty list"),
        "{}",
        message(3)
    );
    assert!(message(4).contains("--owner"), "{}", message(4));
    assert!(
        message(5).contains("`owner` is given twice"),
        "{}",
        message(5)
    );
    assert_eq!(
        ran.snapshot(),
        before,
        "a refused request changed the state"
    );
}

#[test]
fn a_mac_on_the_batchs_command_line_is_refused_not_dropped() {
    // `--mac` names one NIC: a batch's requests carry their own (`"mac"`), and a flag the
    // batch would not use must not leave every NIC without one, exit 0.
    let t = Test::new("dual-stack");
    let file = t.input(
        "nics.jsonl",
        "{\"pool\":\"vpc-main\",\"owner\":\"VirtualMachine/web-01/0\"}\n",
    );
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod"])
        .args(["--mac", "02:16:3e:00:00:01"])
        .status(code::INVALID)
        .unchanged()
        .run();
    assert!(
        ran.stderr.contains("cannot be used with '--mac"),
        "{}",
        ran.stderr
    );
}

#[test]
fn dry_run_on_the_command_line_makes_every_request_a_dry_run_whatever_it_says() {
    let t = Test::new("dual-stack");
    let mut t = t
        .args(["allocate", "vpc-main", "-n", "acme/prod"])
        .args(["--owner", "VirtualMachine/web-01/0"])
        .run()
        .then();
    let before = t.snapshot();
    // A preview must change nothing, even where a request says `"dryRun": false` (the
    // release with `force`: whoever holds it).
    for (command, request, action) in [
        (
            "allocate",
            r#"{"pool":"vpc-main","owner":"VirtualMachine/web-02/0","dryRun":false}"#,
            "would-create",
        ),
        (
            "release",
            r#"{"pool":"vpc-main","address":"10.42.0.1","force":true,"dryRun":false}"#,
            "would-release",
        ),
    ] {
        let file = t.input("requests.jsonl", &format!("{request}\n"));
        let ran = t
            .args([
                command,
                "-f",
                &file,
                "-n",
                "acme/prod",
                "--dry-run",
                "-o",
                "json",
            ])
            .run();
        assert_eq!(results(&ran.stdout)[0]["action"], action, "{}", ran.stdout);
        assert_eq!(
            ran.snapshot(),
            before,
            "a dry run of {command} changed the state"
        );
        t = ran.then();
    }
}

#[test]
fn an_interrupted_batch_prints_the_table_of_the_requests_that_ran() {
    let t = Test::new("dual-stack");
    let mut child = spawn_batch_with(&t, &[]);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"pool":"vpc-main","owner":"VirtualMachine/web-01/0"}}"#
    )
    .unwrap();
    // The table comes at the end: wait for the claim itself.
    let start = Instant::now();
    while !holders(&t).contains("VirtualMachine/web-01/0") {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no claim was made"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    terminate(&child);
    let stdout = child.stdout.take();
    let (status, stderr) = wait_bounded(child);
    drop(stdin);
    assert_eq!(status, Some(130), "{stderr}");
    common::assert_one_error(&stderr);
    // What the request that ran got is on stdout, not lost with the interruption.
    let table = read_all(stdout);
    assert!(
        table.contains("VirtualMachine/web-01/0") && table.contains("created"),
        "{table}"
    );
}

#[test]
fn a_closed_stderr_leaves_the_exit_code_as_documented_not_a_panic() {
    let t = Test::new("dual-stack");
    let file = t.input(
        "bad.jsonl",
        "{\"pool\":\"vpc-main\",\"owner\":\"web-03\"}\n{\"pool\":\"vpc-main\",\"owner\":\"web-04\"}\n",
    );
    for args in [
        // Each failure is an `error:` line on stderr as it comes, then the summary.
        &[
            "allocate",
            "-f",
            file.as_str(),
            "-n",
            "acme/prod",
            "-o",
            "name",
        ][..],
        &["allocate", "no-such-pool", "--owner", "FloatingIP/f"][..],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        // Whoever reads stderr has gone (`2>&1 | head -0`).
        drop(reader);
        let out = t
            .command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(writer)
            .status()
            .expect("run ipamctl");
        let want = if args[1] == "-f" {
            code::INVALID
        } else {
            code::NOT_FOUND
        };
        assert_eq!(out.code(), Some(want), "{args:?}");
    }
}

#[test]
fn a_line_without_end_ends_the_batch_with_exit_2_instead_of_reading_for_ever() {
    let t = Test::new("dual-stack");
    let mut child = spawn_batch(&t);
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take();
    // One request, then zeros without a newline for as long as the batch reads them.
    let writer = std::thread::spawn(move || {
        let _ = writeln!(
            stdin,
            r#"{{"pool":"vpc-main","owner":"VirtualMachine/web-01/0"}}"#
        );
        let zeros = vec![0u8; 1 << 16];
        while stdin.write_all(&zeros).is_ok() {}
    });
    let (status, stderr) = wait_bounded(child);
    writer.join().unwrap();
    assert_eq!(status, Some(code::INVALID), "{stderr}");
    let got = results(&read_all(stdout));
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0]["action"], "created", "{}", got[0]);
    let message = got[1]["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the rest of the input is not read"),
        "{message}"
    );
}

#[test]
fn comments_without_end_before_the_first_request_end_the_batch_with_exit_2() {
    let t = Test::new("dual-stack");
    let before = t.snapshot();
    let mut child = spawn_batch(&t);
    let mut stdin = child.stdin.take().unwrap();
    // Comment lines for as long as the batch reads them: what it keeps of them (for the
    // YAML form) must stay bounded.
    let writer = std::thread::spawn(move || {
        let comments = format!("#{}\n", "x".repeat(4095)).repeat(16);
        while stdin.write_all(comments.as_bytes()).is_ok() {}
    });
    let (status, stderr) = wait_bounded(child);
    writer.join().unwrap();
    assert_eq!(status, Some(code::INVALID), "{stderr}");
    common::assert_one_error(&stderr);
    assert!(stderr.contains("has no request in its first"), "{stderr}");
    assert_eq!(t.snapshot(), before);
}

#[test]
fn control_characters_in_a_requests_owner_reach_no_terminal() {
    let t = Test::new("dual-stack");
    // An escape sequence and a newline in the hostname, then in the NIC index.
    let file = t.input(
        "hostile.jsonl",
        concat!(
            r#"{"pool":"vpc-main","owner":"VirtualMachine/a\u001b[31m\n/0"}"#,
            "\n",
            r#"{"pool":"vpc-main","owner":"VirtualMachine/a/\u001b[2J"}"#,
            "\n"
        ),
    );
    let ran = t
        .args(["allocate", "-f", &file, "-n", "acme/prod"])
        .status(code::INVALID)
        .unchanged()
        .run();
    for (name, text) in [("stdout", &ran.stdout), ("stderr", &ran.stderr)] {
        assert!(
            !text.contains('\u{1b}'),
            "{name} carries an escape:\n{text}"
        );
    }
    // One row per request, one line each: no newline of the input splits one.
    assert_eq!(ran.stdout.lines().count(), 3, "{}", ran.stdout);
    let t = ran.then();
    // The single command says it in one line too.
    let ran = t
        .args(["allocate", "vpc-main", "-n", "acme/prod"])
        .args(["--owner", "VirtualMachine/a\u{1b}[31m\n/0"])
        .fails(code::INVALID)
        .unchanged()
        .run();
    assert!(!ran.stderr.contains('\u{1b}'), "{}", ran.stderr);
}

#[test]
fn a_fifo_as_the_batch_file_is_refused_at_once_with_the_way_to_read_a_pipe() {
    let t = Test::new("dual-stack");
    let fifo = t.root().join("requests.fifo");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("run mkfifo");
    assert!(made.success());
    // No writer ever comes: the batch must neither wait for one nor take the silence for an
    // empty batch.
    let mut child = t
        .command(["allocate", "-f", fifo.to_str().unwrap(), "-n", "acme/prod"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl");
    child.stdin.take();
    let (status, stderr) = wait_bounded(child);
    assert_eq!(status, Some(code::INVALID), "{stderr}");
    common::assert_one_error(&stderr);
    assert!(
        stderr.contains("hint:") && stderr.contains("-f -"),
        "{stderr}"
    );
}

/// Every command's notes and summaries on stderr (`No changes.`, `note: … nothing to
/// release`, `check`'s summary, a subnet's `created`) are dropped when nobody reads stderr,
/// never a panic (exit 101): the documented exit code stands.
#[test]
fn commands_whose_stderr_is_closed_keep_their_documented_exit_codes() {
    let t = Test::new("dual-stack");
    let cases: &[(&[&str], i32)] = &[
        (&["list", "--owner", "VirtualMachine/nobody/0"], code::OK),
        (&["check"], code::OK),
        (
            &[
                "release",
                "-n",
                "acme/prod",
                "--owner",
                "VirtualMachine/nobody/0",
                "--ignore-not-found",
            ],
            code::OK,
        ),
        (
            &[
                "subnet",
                "create",
                "s9",
                "-n",
                "acme/prod",
                "--pool",
                "vpc-main",
                "--prefix-length",
                "28",
            ],
            code::OK,
        ),
        (
            &[
                "allocate",
                "vpc-main",
                "-n",
                "acme/prod",
                "--owner",
                "VirtualMachine/w/0",
                "--dry-run",
            ],
            code::OK,
        ),
    ];
    for (args, want) in cases {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let out = t
            .command(*args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(writer)
            .status()
            .expect("run ipamctl");
        assert_eq!(out.code(), Some(*want), "{args:?}");
    }
}
