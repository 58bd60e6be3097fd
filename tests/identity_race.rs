//! One owner's name, two identities, racing (issue 46, finding 4): real processes asking
//! for `vm-N/0` with its uid and without one at the same instant, on both stores. However
//! they interleave, the name ends with one address in the pool: one request is answered,
//! the other is exit 4 naming the holder. On the file store the owner lock is the name's
//! (`Owner::lock_key`), so the two serialise; on PostgreSQL the unique index of migration
//! 12 arbitrates the insert. The batch with `--jobs` runs the same race on connections of
//! one process.

mod either;

use std::collections::BTreeMap;
use std::process::Output;
use std::time::{Duration, Instant};

use either::{Store, pg};

const POOL: &str = "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: front\nspec:\n  cidr: 10.72.0.0/22\n  kind: public\n";

const UID: &str = "0f8fad5b-d9cb-469f-a165-70867728950e";

/// Each owner name's allocations: name → [(address, uid or "-")].
fn held(store: &Store) -> BTreeMap<String, Vec<(String, String)>> {
    let list = store.ok(&["list", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let mut held: BTreeMap<String, Vec<(String, String)>> = BTreeMap::new();
    for m in list["items"].as_array().unwrap() {
        let owner = &m["spec"]["owner"];
        held.entry(owner["name"].as_str().unwrap().to_owned())
            .or_default()
            .push((
                m["spec"]["address"].as_str().unwrap().to_owned(),
                owner["uid"].as_str().unwrap_or("-").to_owned(),
            ));
    }
    held
}

/// `check` finds nothing wrong.
fn assert_check_clean(store: &Store) {
    let out = store.cmd(&["check"], None).output().unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        pg::stdout(&out),
        pg::stderr(&out)
    );
}

/// The two requests for `vm-N/0`: with the uid, and without one.
fn both(n: usize) -> [Vec<String>; 2] {
    let owner = format!("VirtualMachine/vm-{n}/0");
    let bare = vec!["allocate".into(), "front".into(), "--owner".into(), owner];
    let mut with_uid = bare.clone();
    with_uid.extend(["--uid".into(), UID.into()]);
    [with_uid, bare]
}

/// One request answered (exit 0), the other refused (exit 4, one `error:` line naming the
/// holder's address), and the name holding that one address.
#[cfg(feature = "failpoints")]
fn assert_one_won(store: &Store, n: usize, outs: &[Output]) {
    let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [Some(0), Some(4)],
        "vm-{n}: exits {codes:?}\n{}\n{}",
        pg::stderr(&outs[0]),
        pg::stderr(&outs[1])
    );
    let won = outs.iter().find(|o| o.status.success()).unwrap();
    let lost = outs.iter().find(|o| !o.status.success()).unwrap();
    let address = pg::stdout(won).trim().to_owned();
    pg::assert_one_error(lost);
    assert!(
        pg::stderr(lost).contains(&format!("holds {address} in pool `front`")),
        "{}",
        pg::stderr(lost)
    );
    let holders = held(store);
    assert_eq!(
        holders.get(&format!("vm-{n}/0")).map(Vec::len),
        Some(1),
        "vm-{n}/0 holds {:?}",
        holders.get(&format!("vm-{n}/0"))
    );
}

/// Both requests of each name held open after their look-up (a fail point sleeps before
/// the claim): on the code before, each found nothing and each claimed an address.
#[cfg(feature = "failpoints")]
fn held_open_after_the_look_up(db: bool) {
    let store = Store::new(db, POOL);
    for n in 0..3 {
        let children: Vec<_> = both(n)
            .iter()
            .map(|args| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                store.spawn(&args, Some("allocate-before-claim=sleep(700)"))
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| pg::wait_or_kill(c, 60, "a claim held open"))
            .collect();
        assert_one_won(&store, n, &outs);
    }
    assert_check_clean(&store);
}

#[cfg(feature = "failpoints")]
#[test]
fn a_name_asked_for_with_and_without_its_uid_at_once_gets_one_address_in_a_state_directory() {
    held_open_after_the_look_up(false);
}

#[cfg(feature = "failpoints")]
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_name_asked_for_with_and_without_its_uid_at_once_gets_one_address_on_postgres() {
    held_open_after_the_look_up(true);
}

/// Plain processes, no fail point: 4 names at a time, each asked for by 2 processes with
/// its uid and 2 without, all started together; at most 12 rounds and 60 s.
fn storm(db: bool) {
    let store = Store::new(db, POOL);
    let started = Instant::now();
    let mut n = 0;
    for _round in 0..12 {
        if started.elapsed() > Duration::from_secs(60) {
            break;
        }
        let names: Vec<usize> = (n..n + 4).collect();
        n += 4;
        let children: Vec<(usize, std::process::Child)> = names
            .iter()
            .flat_map(|&n| {
                let [with_uid, bare] = both(n);
                [with_uid.clone(), bare.clone(), with_uid, bare].map(|args| (n, args))
            })
            .map(|(n, args)| {
                let args: Vec<&str> = args.iter().map(String::as_str).collect();
                (n, store.spawn(&args, None))
            })
            .collect();
        let mut outs: BTreeMap<usize, Vec<Output>> = BTreeMap::new();
        for (n, child) in children {
            outs.entry(n)
                .or_default()
                .push(pg::wait_or_kill(child, 60, "a claim"));
        }
        let all = held(&store);
        for (n, outs) in outs {
            let name = format!("vm-{n}/0");
            let holders = all.get(&name).cloned().unwrap_or_default();
            assert_eq!(holders.len(), 1, "{name} holds {holders:?}");
            let (address, uid) = &holders[0];
            for out in &outs {
                match out.status.code() {
                    // Every answer is the one address the name holds.
                    Some(0) => assert_eq!(pg::stdout(out).trim(), address, "{name}"),
                    // Every refusal names it, under the uid it is held by.
                    Some(4) => assert!(
                        pg::stderr(out).contains(&format!("holds {address} in pool `front`"))
                            && (uid == "-" || pg::stderr(out).contains(uid.as_str())),
                        "{name}: {}",
                        pg::stderr(out)
                    ),
                    other => panic!("{name}: exit {other:?}: {}", pg::stderr(out)),
                }
            }
        }
    }
    assert_check_clean(&store);
}

#[test]
fn a_storm_of_requests_with_and_without_the_uid_leaves_each_name_one_address_in_a_state_directory()
{
    storm(false);
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_storm_of_requests_with_and_without_the_uid_leaves_each_name_one_address_on_postgres() {
    storm(true);
}

/// `allocate -f --jobs 4` on PostgreSQL: each name asked for on two lines, with and without
/// its uid, which the workers run at once. One line per name is answered, the other is
/// exit 4 naming the holder.
#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_batch_on_four_connections_gives_each_name_one_address() {
    let store = Store::new(true, POOL);
    let names = 60;
    let mut lines = String::new();
    for n in 0..names {
        let owner = format!("VirtualMachine/vm-{n}/0");
        lines.push_str(&format!(
            "{{\"pool\":\"front\",\"owner\":\"{owner}\",\"uid\":\"{UID}\"}}\n{{\"pool\":\"front\",\"owner\":\"{owner}\"}}\n"
        ));
    }
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), lines).unwrap();
    let child = store.spawn(
        &[
            "allocate",
            "-f",
            file.path().to_str().unwrap(),
            "--jobs",
            "4",
            "-o",
            "json",
        ],
        None,
    );
    let out = pg::wait_or_kill(child, 120, "the batch");
    let got = pg::json_lines(&pg::stdout(&out));
    assert_eq!(got.len(), 2 * names, "{}", pg::stderr(&out));
    let holders = held(&store);
    for n in 0..names {
        let name = format!("vm-{n}/0");
        assert_eq!(
            holders.get(&name).map(Vec::len),
            Some(1),
            "{name} holds {:?}",
            holders.get(&name)
        );
        let pair = &got[2 * n..2 * n + 2];
        let exits: Vec<Option<i64>> = pair.iter().map(|r| r["error"]["exit"].as_i64()).collect();
        assert!(
            exits == [None, Some(4)] || exits == [Some(4), None],
            "{name}: {pair:?}"
        );
    }
    assert_check_clean(&store);
}
