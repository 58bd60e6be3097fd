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

/// A supernet's entry counts prefixes, not addresses: the table says how many are claimed,
/// the largest free block and the share of its addresses claimed; the JSON lists each
/// claimed prefix with its owner and the free blocks of each handed-out length; the HTML
/// page draws it by its prefixes and names each claim's owner.
#[test]
fn a_supernet_is_reported_by_its_prefixes() {
    let t = Test::new("empty");
    let pool = t.input(
        "sn.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: provider-v6\nspec:\n  cidr: 2001:db8::/48\n  kind: supernet\n  prefixLengths: {min: 52, max: 56}\n",
    );
    let t = t
        .args(["apply", "-f", &pool])
        .run()
        .then()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "52",
            "--owner",
            "VPC/router",
            "--uid",
            uid::WEB01,
        ])
        .stdout("2001:db8::/52\n")
        .run()
        .then()
        .args([
            "allocate",
            "provider-v6",
            "--prefix-length",
            "56",
            "--owner",
            "FloatingIP/a",
        ])
        .stdout("2001:db8:0:1000::/56\n")
        .run()
        .then();
    let table = t.args(["report"]).run();
    let row = table
        .stdout
        .lines()
        .find(|l| l.contains("provider-v6"))
        .expect("a row for the supernet");
    assert!(
        row.contains("2 prefixes")
            && row.contains("largest 2001:db8:0:8000::/49")
            && row.contains("6.6%"),
        "{row}"
    );
    let json = table.then().args(["report", "-o", "json"]).run();
    let items = common::list_items(&json.stdout);
    let prefixes = &items[0]["status"]["prefixes"];
    assert_eq!(
        prefixes["claimed"][0]["prefix"], "2001:db8::/52",
        "{prefixes}"
    );
    assert_eq!(prefixes["claimed"][0]["owner"], "VPC/router", "{prefixes}");
    assert_eq!(prefixes["claimed"][0]["uid"], uid::WEB01, "{prefixes}");
    assert_eq!(
        prefixes["claimed"][1]["owner"], "FloatingIP/a",
        "{prefixes}"
    );
    assert_eq!(
        prefixes["largestFree"], "2001:db8:0:8000::/49",
        "{prefixes}"
    );
    assert_eq!(prefixes["freeBlocks"][0]["length"], 52, "{prefixes}");
    assert_eq!(prefixes["freeBlocks"][0]["count"], 14, "{prefixes}");
    let html = json.then().args(["report", "-o", "html"]).run();
    assert!(
        html.stdout.contains("A supernet: 2 prefixes claimed")
            && html.stdout.contains("<table class=\"prefixes\">")
            && html
                .stdout
                .contains("2001:db8:0:1000::/56  claimed   FloatingIP/a"),
        "{}",
        html.stdout
    );
}

/// A supernet's LARGEST HOLDER names its holders as `pool show` does (`VPC t/x/blue` for a
/// VPC's range): the one that covers the most addresses, with its prefix (or how many it
/// holds), and "every holder has a /56" when none covers more than another.
#[test]
fn a_supernets_largest_holder_is_named_as_pool_show_names_it() {
    let t = Test::new("empty");
    let pools = t.input(
        "sn.yaml",
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: provider\nspec:\n  cidr: 2001:db8::/48\n  kind: supernet\n  prefixLengths: {min: 52, max: 56}\n---\napiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: edge\nspec:\n  cidr: 2001:db9::/48\n  kind: supernet\n  prefixLengths: {min: 56, max: 56}\n",
    );
    let holder = |report: &str, pool: &str| -> String {
        let header = report.lines().next().expect("a header");
        let at = header.find("LARGEST HOLDER").expect("the column");
        let row = report
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(pool))
            .unwrap_or_else(|| panic!("a row for {pool}:\n{report}"));
        row[at..].trim_end().to_owned()
    };
    let ran = t
        .args(["apply", "-f", &pools])
        .run()
        .then()
        .args([
            "vpc",
            "create",
            "blue",
            "-n",
            "t/x",
            "--from-pool",
            "provider",
        ])
        .args(["--prefix-length", "56"])
        .run()
        .then()
        .args(["pool", "show", "provider"])
        .run();
    assert!(
        ran.stdout.contains("  2001:db8::/56  VPC t/x/blue\n"),
        "{}",
        ran.stdout
    );
    let ran = ran.then().args(["report", "-A"]).run();
    assert_eq!(
        holder(&ran.stdout, "provider"),
        "VPC t/x/blue (/56)",
        "{}",
        ran.stdout
    );
    // A /52 covers more than a /56, whoever holds it.
    let mut ran = ran
        .then()
        .args([
            "vpc",
            "create",
            "red",
            "-n",
            "t/x",
            "--from-pool",
            "provider",
        ])
        .args(["--prefix-length", "52"])
        .run()
        .then()
        .args(["allocate", "provider", "--prefix-length", "56"])
        .args(["--owner", "FloatingIP/a"])
        .run();
    for owner in ["FloatingIP/x", "FloatingIP/y"] {
        ran = ran
            .then()
            .args([
                "allocate",
                "edge",
                "--prefix-length",
                "56",
                "--owner",
                owner,
            ])
            .run();
    }
    let ran = ran.then().args(["report", "-A"]).run();
    assert_eq!(
        holder(&ran.stdout, "provider"),
        "VPC t/x/red (/52)",
        "{}",
        ran.stdout
    );
    assert_eq!(
        holder(&ran.stdout, "edge"),
        "every holder has a /56",
        "{}",
        ran.stdout
    );
}
