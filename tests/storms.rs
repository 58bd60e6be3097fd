//! Every storm and soak loop of the tests is bounded in time as well as in count, and does a
//! least amount of work (`tests/budget`): a loop of rounds that each start and wait for
//! processes draws its rounds from a [`Budget`], so a slow machine shortens it, and a
//! broken one (every process waiting out a timeout) fails it, instead of running for an
//! hour or passing on nothing.

#[path = "budget/mod.rs"]
mod budget;
mod scan;

use std::path::{Path, PathBuf};
use std::time::Duration;

use budget::Budget;
use scan::Source;

#[test]
fn a_budget_stops_at_its_count_or_its_time_and_fails_below_its_floor() {
    let by_count = Budget::new("count", 3, Duration::from_secs(60));
    assert_eq!(by_count.rounds().collect::<Vec<_>>(), [0, 1, 2]);
    assert!(by_count.finish().starts_with("count: 3 of 3 in "));

    let by_time = Budget::new("time", 1_000_000, Duration::from_millis(100)).at_least(2);
    let mut n = 0;
    while by_time.more(n) {
        std::thread::sleep(Duration::from_millis(10));
        n += 1;
    }
    assert!((2..20).contains(&n), "{n} rounds in 100 ms of 10 ms each");
    assert!(by_time.finish().ends_with("(the time ran out first)"));

    // Every round waits out a timeout: the floor is not reached, and the test fails.
    let starved = Budget::new("starved", 10, Duration::from_millis(30)).at_least(2);
    for _ in starved.rounds() {
        std::thread::sleep(Duration::from_millis(40));
    }
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| starved.finish()));
    let message = failed.expect_err("a storm that did 1 of its 2 rounds passed");
    let message = message.downcast_ref::<String>().expect("a message");
    assert!(message.contains("only 1 done"), "{message}");

    // Not asked: checked when dropped all the same.
    let dropped = std::panic::catch_unwind(|| {
        let never = Budget::new("never", 5, Duration::ZERO).at_least(1);
        for _ in never.rounds() {}
    });
    assert!(dropped.is_err(), "a loop that did nothing passed");
}

/// Calls that start an ipamctl (or other) process, and calls that wait for one.
const STARTS: [&str; 6] = [
    ".spawn()",
    "state.spawn(",
    "spawn_piped(",
    "spawn_allocates(",
    "run_all",
    "run_at_once(",
];
const WAITS: [&str; 6] = [
    "wait_with_output(",
    ".wait()",
    "finish(",
    "run_all",
    "run_at_once(",
    ".output()",
];

/// The loops of `source` that run rounds of processes with a count alone: (line, header).
fn unbounded_storms(source: &Source) -> Vec<(usize, String)> {
    let m = &source.masked;
    let mut found = Vec::new();
    for keyword in ["for", "while"] {
        for at in scan::words(m, keyword) {
            let Some(open) = m[at..].find('{').map(|o| at + o) else {
                continue;
            };
            let header = m[at..open].split_whitespace().collect::<Vec<_>>().join(" ");
            // `for x in 0..n`, `for x in 1..=n`, `for x in 0..rounds()`; `while n < most`.
            let counted = match keyword {
                "for" => header.split(" in ").nth(1).is_some_and(|range| {
                    range.contains("..") && range.starts_with(|c: char| c.is_ascii_digit())
                }),
                _ => header.contains(" < ") && !header.contains("elapsed"),
            };
            // `budget.rounds()`, not a range up to `rounds()`.
            let budgeted = (header.contains(".rounds()") && !header.contains("..rounds()"))
                || header.contains(".more(");
            if !counted || budgeted {
                continue;
            }
            let close = scan::matching(m, open);
            let body = &m[open..close];
            if STARTS.iter().any(|s| body.contains(s)) && WAITS.iter().any(|w| body.contains(w)) {
                found.push((m[..at].matches('\n').count() + 1, header));
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read tests/").flatten() {
        let path = entry.path();
        if path.is_dir() {
            if !path.ends_with("scan") {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && !path.ends_with("storms.rs")
            && !path.ends_with("tools.rs")
        {
            out.push(path);
        }
    }
}

#[test]
fn every_loop_of_rounds_of_processes_draws_them_from_a_budget() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    files.sort();
    let mut unbounded = Vec::new();
    let mut budgets = 0;
    for file in &files {
        let source = Source::read(file);
        budgets += scan::words(&source.masked, "Budget").len();
        for (line, header) in unbounded_storms(&source) {
            unbounded.push(format!(
                "{}:{line}: `{header}` runs rounds of processes with a count alone: draw them \
                 from a Budget (tests/budget), `for round in budget.rounds()`",
                file.strip_prefix(&dir).unwrap_or(file).display()
            ));
        }
    }
    assert!(unbounded.is_empty(), "{}", unbounded.join("\n"));
    // The check reads something: the kill, stress and race tests are there.
    assert!(budgets > 20, "only {budgets} mentions of Budget");
}

#[test]
fn a_storm_counted_alone_is_reported_and_one_with_a_budget_is_not() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("storm.rs");
    let text = "fn storm(state: &State) {\n    while kills < target {\n        let c = state.spawn(&argv);\n        finish(&argv, c);\n    }\n    for round in 0..rounds() {\n        state.run_all(&argvs);\n    }\n    for kill_after in [1, 40] {\n        state.spawn(&argv).wait();\n    }\n    let budget = Budget::new(\"x\", 3, limit);\n    for round in budget.rounds() {\n        state.run_all(&argvs);\n    }\n    while budget.more(kills) {\n        state.run_all(&argvs);\n    }\n}\n";
    std::fs::write(&path, text).unwrap();
    let found = unbounded_storms(&Source::read(&path));
    let lines: Vec<usize> = found.iter().map(|(l, _)| *l).collect();
    assert_eq!(lines, [6, 2], "{found:?}");
}
