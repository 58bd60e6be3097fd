//! `ipamctl report` as text and JSON: counts as `pool list` writes them (`2^64 - 5`, never
//! 20 digits), the largest holder by name (the NICs of one VM counted together), and
//! "every holder has N" when no holder is larger than another.

mod common;

use common::{Test, uid};

#[test]
fn the_text_report_writes_large_counts_as_pool_list_does() {
    let ran = Test::new("dual-stack")
        .args(["report", "-A"])
        .stderr("")
        .run();
    let public = ran
        .stdout
        .lines()
        .find(|l| l.contains("public-v6"))
        .expect("a row for public-v6");
    assert!(public.contains("2^64 - 5"), "{public}");
    assert!(
        !ran.stdout.contains("18446744073709551611"),
        "{}",
        ran.stdout
    );
    let list = Test::new("dual-stack").args(["pool", "list", "-A"]).run();
    assert!(
        list.stdout.contains("2^64 - 5"),
        "the same formatter as pool list"
    );
}

#[test]
fn the_largest_holder_is_named_and_equal_holders_are_said_to_be_equal() {
    let ran = Test::new("populated")
        .args(["report", "-A"])
        .stderr("")
        .run();
    let row = |pool: &str| {
        ran.stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(pool))
            .unwrap_or_else(|| panic!("a row for {pool}"))
            .to_owned()
    };
    // Two NICs of one VM (one uid): the VM, by name, not its uid.
    let main = row("vpc-main");
    assert!(
        main.ends_with("VirtualMachine/web-01/0 and 1 more (2)"),
        "{main}"
    );
    assert!(!ran.stdout.contains(uid::WEB01), "no uid in the table");
    // Two floating IPs of one address each: neither is larger.
    let public = row("public-zone-a");
    assert!(public.ends_with("every holder has 1"), "{public}");

    let json = Test::new("populated")
        .args(["report", "-A", "-o", "json"])
        .run();
    let items = common::list_items(&json.stdout);
    let status = |name: &str| {
        items
            .iter()
            .find(|i| i["metadata"]["name"] == name)
            .map(|i| i["status"].clone())
            .unwrap_or_else(|| panic!("an item for {name}"))
    };
    let main = status("vpc-main");
    assert_eq!(
        main["largestHolders"][0]["holder"],
        "VirtualMachine/web-01/0"
    );
    assert_eq!(main["largestHolders"][0]["uid"], uid::WEB01);
    assert_eq!(main["largestHolders"][0]["ownerCount"], 2);
    let public = status("public-zone-a");
    assert_eq!(public["everyHolderHas"], 1);
    assert_eq!(public["holders"], 2);
    // By name: the same order whatever the uids or the order of the files.
    let names: Vec<&str> = public["largestHolders"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|h| h["holder"].as_str().expect("a name"))
        .collect();
    let mut sorted = names.clone();
    sorted.sort_unstable();
    assert_eq!(names, sorted);
}
