//! The maps an operator reads (issue 33), on whichever store the builder runs (the file
//! store, or PostgreSQL with `IPAMCTL_TEST_STORE=postgres`): an IPv6 /48 with three /64
//! subnets and 30 allocations drawn a labelled line per subnet, each shaded by its count on
//! a log scale the legend names, never fuller than it is; `--within` one of its /64s zoomed to
//! the addresses; an IPv4 /16 that outlines and names its stored /26 and shades 30 of its /24's
//! 253 candidates by their true share; a VPC's range held by that VPC by name in `pool show`
//! (text, JSON with its uid), the supernet map (text and SVG) and the report (JSON and HTML);
//! and the new maps loaded in headless Chromium, which renders them to screenshots.

mod chromium;
mod common;

use std::net::IpAddr;
use std::path::Path;

use common::Test;

fn step(test: Test, args: &[&str]) -> Test {
    test.args(args).run().then()
}

/// Runs `ipamctl ARGS` (exit 0); its stdout and the state for the next command.
fn out(test: Test, args: &[&str]) -> (String, Test) {
    let ran = test.args(args).run();
    (ran.stdout.clone(), ran.then())
}

/// Writes an allocation of pool `pool` (cluster-scoped) at `address` for `owner`, as a file
/// the next command reads (on PostgreSQL, imports).
fn allocation(test: &Test, pool: &str, address: IpAddr, owner: &str) {
    let name = ipamctl::model::PoolName::new(pool).expect("valid");
    let owner = ipamctl::model::Owner::parse(owner, None).expect("valid");
    let m = ipamctl::model::AllocationManifest::new(&name, None, address, owner);
    let file = ipamctl::model::allocation_name(&name, address);
    test.write(
        &format!("cluster/ipallocations/{file}.yaml"),
        &ipamctl::yaml::encode(&m),
    );
}

fn pool(name: &str, cidr: &str, kind: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {name}\nspec:\n  cidr: {cidr}\n  kind: {kind}\n"
    )
}

/// An IPv6 /48 with subnets `web1`..`web3` (fd10:0:0:1::/64 …) holding 5, 10 and 15 of 30
/// allocations.
fn slash_48() -> Test {
    let mut test = Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&pool("six", "fd10::/48", "public"))
        .run()
        .then();
    for i in 1..=3 {
        test = step(
            test,
            &[
                "subnet",
                "create",
                &format!("web{i}"),
                "--pool",
                "six",
                "--cidr",
                &format!("fd10:0:0:{i}::/64"),
            ],
        );
    }
    for (subnet, count) in [(1u16, 5u16), (2, 10), (3, 15)] {
        for n in 0..count {
            let address: IpAddr = format!("fd10:0:0:{subnet}::{:x}", 0x10 + n)
                .parse()
                .expect("valid");
            allocation(
                &test,
                "six",
                address,
                &format!("VirtualMachine/vm-{subnet}-{n}/0"),
            );
        }
    }
    test
}

/// The `(class, tooltip)` of each cell `<rect>` of `svg`.
fn cells(svg: &str) -> Vec<(String, String)> {
    let doc = roxmltree::Document::parse(svg).expect("well-formed SVG");
    doc.descendants()
        .filter(|n| n.has_tag_name("rect"))
        .filter_map(|n| {
            let class = n.attribute("class")?;
            class.starts_with("cell ").then(|| {
                let tip = n
                    .children()
                    .find(|c| c.has_tag_name("title"))
                    .and_then(|t| t.text())
                    .unwrap_or_default();
                (class.to_owned(), tip.to_owned())
            })
        })
        .collect()
}

/// The count shade a region of `held` allocations may have: the step whose range holds it.
fn count_step(held: u64) -> &'static str {
    match held {
        0 => "empty",
        1..=9 => "shade-1",
        10..=99 => "shade-2",
        100..=999 => "shade-3",
        _ => "shade-4",
    }
}

#[test]
fn an_ipv6_slash_48_draws_each_subnet_labelled_and_shaded_by_its_count() {
    let test = slash_48();
    let (text, test) = out(test, &["pool", "show", "six", "--map"]);
    for (i, held) in [(1, 5), (2, 10), (3, 15)] {
        let line = format!("fd10:0:0:{i}::/64  ");
        let row = text
            .lines()
            .find(|l| l.starts_with(&line))
            .unwrap_or_else(|| panic!("no line for web{i}:\n{text}"));
        assert!(
            row.ends_with(&format!(
                "subnet web{i}: {held} of 2^64 - 2 candidates allocated"
            )),
            "{row}"
        );
    }
    assert!(
        text.contains("shade: allocations a cell holds, log scale"),
        "the legend names the scale:\n{text}"
    );
    assert!(!text.contains("up to 25%"), "{text}");
    assert!(text.contains("30 allocated"), "{text}");

    let (svg, test) = out(test, &["pool", "show", "six", "--map", "-o", "svg"]);
    let drawn = cells(&svg);
    assert_eq!(drawn.len(), 3, "a cell per subnet: {drawn:?}");
    for ((class, tip), (i, held)) in drawn.iter().zip([(1, 5u64), (2, 10), (3, 15)]) {
        assert_eq!(
            tip,
            &format!("fd10:0:0:{i}::/64: subnet web{i}: {held} of 2^64 - 2 candidates allocated")
        );
        // No shade above what it holds: the step's range holds the true count, and a share
        // of 2^64 (10^-18) is never shown as one.
        assert_eq!(class, &format!("cell {}", count_step(held)), "web{i}");
    }
    assert!(
        svg.contains("log scale"),
        "the SVG's legend names the scale"
    );

    // One /64 zoomed in: its one /120 in use, address by address, each holder named.
    let (svg, _) = out(
        test,
        &[
            "pool",
            "show",
            "six",
            "--map",
            "--within",
            "fd10:0:0:2::/64",
            "-o",
            "svg",
        ],
    );
    let drawn = cells(&svg);
    assert_eq!(drawn.len(), 256, "one /120, address by address");
    let held: Vec<&String> = drawn
        .iter()
        .filter(|(c, _)| c == "cell allocated")
        .map(|(_, t)| t)
        .collect();
    assert_eq!(held.len(), 10);
    assert_eq!(
        held[0],
        "fd10:0:0:2::10 allocated to VirtualMachine/vm-2-0/0"
    );
}

#[test]
fn a_slash_16_map_names_its_stored_slash_26_and_shades_by_the_true_share() {
    let mut test = Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&pool("four", "10.42.0.0/16", "public"))
        .run()
        .then();
    test = step(
        test,
        &[
            "subnet",
            "create",
            "web",
            "--pool",
            "four",
            "--cidr",
            "10.42.1.0/26",
        ],
    );
    for n in 0..30u8 {
        allocation(
            &test,
            "four",
            IpAddr::from([10, 42, 1, 10 + n]),
            &format!("VirtualMachine/v-{n}/0"),
        );
    }
    let (text, test) = out(test, &["pool", "show", "four", "--map"]);
    assert!(
        text.contains(
            "subnet web 10.42.1.0/26 (in the cell 10.42.1.0/24): 30 of 61 candidates allocated"
        ),
        "the subnet is named under the map:\n{text}"
    );
    // 30 of the /24's 253 candidates is 11.9%: the step of 5% to under 20%, not that of 24%.
    let row = text
        .lines()
        .find(|l| l.starts_with("10.42.0.0 "))
        .expect("the first row");
    assert_eq!(row.split_whitespace().nth(1), Some(".+......"), "{row}");
    assert!(text.contains("+ 5% to under 20% used (1)"), "{text}");

    let (svg, test) = out(test, &["pool", "show", "four", "--map", "-o", "svg"]);
    let outlined: Vec<(String, String)> = cells(&svg)
        .into_iter()
        .filter(|(c, _)| c.contains("in-subnet"))
        .collect();
    assert_eq!(
        outlined,
        [(
            "cell shade-2 in-subnet".to_owned(),
            "10.42.1.0/24: 30 of 253 candidates allocated; holds subnet web".to_owned()
        )]
    );
    // `pool show` lists the subnet with its usage, in text and JSON.
    let (text, test) = out(test, &["pool", "show", "four"]);
    assert!(
        text.contains("  web  10.42.1.0/26  30 of 61 candidates allocated, 31 free (49.2% used)"),
        "{text}"
    );
    let (json, _) = out(test, &["pool", "show", "four", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let s = &v["status"]["subnets"][0];
    assert_eq!(
        (&s["name"], &s["cidr"], &s["allocated"], &s["candidates"]),
        (
            &serde_json::json!("web"),
            &serde_json::json!("10.42.1.0/26"),
            &serde_json::json!(30),
            &serde_json::json!(61)
        )
    );
}

/// Supernets `tenants` (10.0.0.0/8) and `tenants6` (fd00::/32); VPC `a1` of `tenant-1/prod`
/// drawing from both, VPC `b2` of `tenant-2` from the first, and a floating /24 claim. The
/// uid of `a1`.
fn vpcs() -> (Test, String) {
    let manifests = format!(
        "{}---\n{}",
        pool("tenants", "10.0.0.0/8", "supernet"),
        pool("tenants6", "fd00::/32", "supernet")
    );
    let test = Test::new("empty")
        .args(["apply", "-f", "-"])
        .stdin(&manifests)
        .run()
        .then();
    let (uid, test) = out(
        test,
        &[
            "vpc",
            "create",
            "a1",
            "-n",
            "tenant-1/prod",
            "--from-pool",
            "tenants",
            "--prefix-length",
            "16",
            "--from-pool",
            "tenants6",
            "--prefix-length",
            "48",
        ],
    );
    let test = step(
        test,
        &[
            "vpc",
            "create",
            "b2",
            "-n",
            "tenant-2",
            "--from-pool",
            "tenants",
            "--prefix-length",
            "16",
        ],
    );
    let test = step(
        test,
        &[
            "allocate",
            "tenants",
            "--prefix-length",
            "24",
            "--owner",
            "FloatingIP/fip-1",
        ],
    );
    (test, uid.trim().to_owned())
}

#[test]
fn a_vpcs_range_is_held_by_that_vpc_by_name_in_every_view() {
    let (test, uid) = vpcs();
    let (text, test) = out(test, &["pool", "show", "tenants"]);
    for line in [
        "  10.0.0.0/16  VPC tenant-1/prod/a1",
        "  10.1.0.0/16  VPC tenant-2/b2",
        "  10.2.0.0/24  FloatingIP/fip-1",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    let (json, test) = out(test, &["pool", "show", "tenants", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    let first = &v["status"]["claims"][0];
    assert_eq!(first["holder"], "VPC tenant-1/prod/a1");
    assert_eq!(first["owner"], "VPC/router");
    assert_eq!(
        first["vpc"],
        serde_json::json!({"namespace": "tenant-1/prod", "name": "a1", "uid": uid})
    );
    assert_eq!(v["status"]["claims"][2]["vpc"], serde_json::Value::Null);

    let (map, test) = out(test, &["pool", "show", "tenants", "--map"]);
    assert!(
        map.contains("10.0.0.0/16    claimed   VPC tenant-1/prod/a1"),
        "{map}"
    );
    let (svg, test) = out(test, &["pool", "show", "tenants6", "--map", "-o", "svg"]);
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let texts: Vec<&str> = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .filter_map(|n| n.text())
        .collect();
    assert!(
        texts.contains(&"fd00::/48         claimed   VPC tenant-1/prod/a1"),
        "{texts:?}"
    );

    // The VPC's own pool names its VPC, in `pool show` and on its map.
    let (text, test) = out(test, &["pool", "show", "vpc-a1", "-n", "tenant-1/prod"]);
    assert!(
        text.contains(&format!("VPC:         tenant-1/prod/a1 (uid {uid})")),
        "{text}"
    );
    let (map, test) = out(
        test,
        &["pool", "show", "vpc-a1", "-n", "tenant-1/prod", "--map"],
    );
    assert!(
        map.starts_with("tenant-1/prod/vpc-a1 (VPC tenant-1/prod/a1) 10.0.0.0/16"),
        "{map}"
    );

    // The VPC router's uplink in a public pool: named as its VPC on the address map.
    let test = test
        .args(["apply", "-f", "-"])
        .stdin(&pool("pub", "203.0.113.0/28", "public"))
        .run()
        .then();
    let test = step(
        test,
        &["allocate", "pub", "--owner", "VPC/router", "--uid", &uid],
    );
    let (svg, test) = out(test, &["pool", "show", "pub", "--map", "-o", "svg"]);
    assert!(
        svg.contains(&format!(
            "<title>203.0.113.1 allocated to VPC tenant-1/prod/a1 (uid {uid})</title>"
        )),
        "{svg}"
    );

    // The report names the uplink's holder as the VPC too.
    let (text, test) = out(test, &["report"]);
    let row = text
        .lines()
        .find(|l| l.contains("203.0.113.0/28"))
        .expect("the public pool's row");
    assert!(row.ends_with("VPC tenant-1/prod/a1 (1)"), "{row}");

    let (json, test) = out(test, &["report", "-o", "json"]);
    assert!(
        json.contains("\"holder\": \"VPC tenant-1/prod/a1\""),
        "{json}"
    );
    assert!(json.contains(&format!("\"uid\": \"{uid}\"")), "{json}");
    let (html, _) = out(test, &["report", "-o", "html"]);
    assert!(
        html.contains(r#"<span class="name">VPC tenant-1/prod/a1</span>"#),
        "the report's table names the VPC"
    );
    assert!(html.contains("claimed   VPC tenant-2/b2"), "and its map");
}

#[test]
#[cfg_attr(not(has_chromium), ignore = "needs Chromium: apt-get install chromium")]
fn the_new_maps_render_in_chromium() {
    // Kept under the target directory for a person to look at.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("map-screenshots");
    std::fs::create_dir_all(&dir).expect("a directory for the screenshots");
    let (six, _) = out(slash_48(), &["pool", "show", "six", "--map", "-o", "svg"]);
    let (zoom, _) = out(
        slash_48(),
        &[
            "pool",
            "show",
            "six",
            "--map",
            "--within",
            "fd10:0:0:3::/64",
            "-o",
            "svg",
        ],
    );
    let (test, _) = vpcs();
    let (supernet, test) = out(test, &["pool", "show", "tenants6", "--map", "-o", "svg"]);
    let (vpc, _) = out(
        test,
        &[
            "pool",
            "show",
            "vpc-a1",
            "-n",
            "tenant-1/prod",
            "--map",
            "-o",
            "svg",
        ],
    );
    let profile = tempfile::tempdir().expect("a profile directory");
    for (name, svg) in [
        ("ipv6-48", six),
        ("ipv6-64-zoomed", zoom),
        ("supernet-v6", supernet),
        ("vpc-16", vpc),
    ] {
        let page = dir.join(format!("{name}.svg"));
        std::fs::write(&page, &svg).expect("the SVG written");
        let shot = dir.join(format!("{name}.png"));
        let _ = std::fs::remove_file(&shot);
        let action = format!("--screenshot={}", shot.display());
        chromium::run(&page, profile.path(), &action, "1000,700");
        let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "{name}: a PNG");
        // A blank page compresses to a few kilobytes; cells and text do not.
        assert!(
            png.len() > 10_000,
            "{name}: the screenshot looks empty ({} bytes)",
            png.len()
        );
    }
}
