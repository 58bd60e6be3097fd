//! `ipamctl report -o html` loaded in headless Chromium (Debian's `chromium`, installed by
//! `.ci/run`): the page the browser builds holds every pool's row, section, map, subnets,
//! free ranges and largest holders, loads nothing from anywhere, and renders to a
//! screenshot; laid out in a 1024-pixel window, its tables fit, no name wraps, and counts
//! read as the tables write them (a script added to a copy of the page measures the layout
//! and writes it into the DOM Chromium dumps, so no screenshot is compared). Without
//! Chromium these tests fail, saying how to install it.

mod chromium;
mod common;

use std::path::Path;

use common::{Test, uid};

/// Runs headless Chromium on `page` with `action` (`--dump-dom`, `--screenshot=…`); its
/// stdout.
fn chromium(page: &Path, profile: &Path, action: &str) -> String {
    chromium_at(page, profile, action, "1200,1600")
}

/// [`chromium`] in a window of `size` (`WIDTH,HEIGHT`).
fn chromium_at(page: &Path, profile: &Path, action: &str, size: &str) -> String {
    chromium::run(page, profile, action, size)
}

#[test]
#[cfg_attr(not(has_chromium), ignore = "needs Chromium: apt-get install chromium")]
fn the_html_report_shows_every_pool_in_a_browser() {
    let ran = Test::new("populated")
        .args(["report", "-o", "html"])
        .stderr("")
        .run();
    let html = ran.stdout.clone();
    // Self-contained: nothing to fetch, nothing to run.
    for outside in ["src=", "<script", "<link", "@import", "url("] {
        assert!(!html.contains(outside), "the page refers to `{outside}`");
    }
    let dir = tempfile::tempdir().expect("a temporary directory");
    let page = dir.path().join("report.html");
    std::fs::write(&page, &html).expect("write the page");
    let profile = dir.path().join("profile");

    let dom = chromium(&page, &profile, "--dump-dom");
    let rows = between(&dom, "<tbody>", "</tbody>", "the pools table has a body");
    assert_eq!(rows.matches("<tr>").count(), 3, "one row per pool:\n{rows}");
    for (pool, used) in [
        ("public-zone-a", "0.8%"),
        ("vpc-dev", "0.4%"),
        ("vpc-main", "0.0%"),
    ] {
        assert!(
            rows.contains(pool) && rows.contains(used),
            "{pool} {used} in\n{rows}"
        );
    }
    for section in [
        "pool-cluster-public-zone-a",
        "pool-acme-dev-vpc-dev",
        "pool-acme-prod-vpc-main",
    ] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "no section {section}"
        );
    }
    // Two pools are drawn cell by cell, the /16 one cell per /24.
    assert_eq!(dom.matches("<svg").count(), 3);
    assert!(dom.contains(
        "203.0.113.4 allocated to FloatingIP/fip-1 (uid a1b2c3d4-0000-4000-8000-000000000003)"
    ));
    assert!(
        dom.contains("<code>203.0.113.5-203.0.113.9</code>"),
        "free ranges"
    );
    assert!(
        dom.contains(&format!("uid {}", uid::WEB01)),
        "largest holders"
    );
    assert!(dom.contains("<p id=\"summary\">3 pools, 0 subnets, 7 allocations.</p>"));

    let shot = dir.path().join("report.png");
    chromium(&page, &profile, &format!("--screenshot={}", shot.display()));
    let png = std::fs::read(&shot).expect("chromium wrote the screenshot");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a PNG");
    let width = u32::from_be_bytes(png[16..20].try_into().expect("IHDR width"));
    let height = u32::from_be_bytes(png[20..24].try_into().expect("IHDR height"));
    assert_eq!((width, height), (1200, 1600));
    // A blank page compresses to a few kilobytes; tables, text and maps do not.
    assert!(
        png.len() > 40_000,
        "the screenshot looks empty ({} bytes)",
        png.len()
    );
}

#[test]
#[cfg_attr(not(has_chromium), ignore = "needs Chromium: apt-get install chromium")]
fn the_report_keeps_the_output_contract() {
    let json = Test::new("populated").args(["report", "-o", "json"]).run();
    let items = common::list_items(&json.stdout);
    assert_eq!(items.len(), 3);
    assert_eq!(items[2]["status"]["largestHolders"][0]["addresses"], 2);
    Test::new("populated")
        .args(["list", "-o", "html"])
        .fails(common::code::INVALID)
        .run();
}

/// The text of `text` after the first `start`, up to the next `end`.
#[track_caller]
fn between<'a>(text: &'a str, start: &str, end: &str, what: &str) -> &'a str {
    text.split(start)
        .nth(1)
        .and_then(|t| t.split(end).next())
        .unwrap_or_else(|| panic!("no {what}"))
}

/// Runs `ipamctl ARGS` on `test`'s state; the state for the next command.
fn step(test: Test, args: &[&str]) -> Test {
    test.args(args).run().then()
}

/// A dual-stack VPC with a long hyphenated name, a subnet in each family (one with a reserved
/// address) and four VMs in each, one address each; beside the `populated` fixture's pools.
fn dual_stack_vpc() -> Test {
    let vpc = "red-production-east";
    let mut test = step(
        Test::new("populated"),
        &[
            "vpc",
            "create",
            vpc,
            "-n",
            "acme/dual",
            "--cidr",
            "10.70.0.0/16",
            "--cidr",
            "fd00:70::/48",
        ],
    );
    for (subnet, pool, cidr, extra) in [
        (
            "web-frontend",
            "vpc-red-production-east",
            "10.70.1.0/24",
            Some("10.70.1.2"),
        ),
        (
            "web-frontend-v6",
            "vpc-red-production-east-v6",
            "fd00:70:0:1::/64",
            None,
        ),
    ] {
        let mut args = vec![
            "subnet",
            "create",
            subnet,
            "-n",
            "acme/dual",
            "--pool",
            pool,
            "--cidr",
            cidr,
        ];
        if let Some(r) = extra {
            args.extend(["--reserved", r]);
        }
        test = step(test, &args);
    }
    for vm in [
        "web-frontend-01",
        "web-frontend-02",
        "web-frontend-03",
        "web-frontend-04",
    ] {
        let owner = format!("VirtualMachine/{vm}/0");
        for (pool, subnet) in [
            ("vpc-red-production-east", "web-frontend"),
            ("vpc-red-production-east-v6", "web-frontend-v6"),
        ] {
            test = step(
                test,
                &[
                    "allocate",
                    pool,
                    "-n",
                    "acme/dual",
                    "--owner",
                    &owner,
                    "--subnet",
                    subnet,
                ],
            );
        }
    }
    test
}

/// What the measuring script found, parsed from the dumped DOM.
fn layout(dom: &str) -> serde_json::Value {
    let text = between(
        dom,
        "<pre id=\"layout\">",
        "</pre>",
        "the measuring script ran and wrote its findings",
    );
    let text = text
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Measures the laid-out page: how wide the document is against the window, which tables
/// end past the window's right edge, and which names (text without spaces that holds a
/// hyphen, outside the SVG maps) are laid out on more than one line.
const MEASURE: &str = r#"<script>
(() => {
  const width = document.documentElement.clientWidth;
  const out = { width, scrollWidth: document.documentElement.scrollWidth, overflow: [], broken: [] };
  for (const t of document.querySelectorAll('table')) {
    const r = t.getBoundingClientRect();
    if (r.right > width + 0.5) out.overflow.push((t.id || t.className) + ' ends at ' + r.right);
  }
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const text = n.data.trim();
    if (!/\w-\w/.test(text) || /\s/.test(text) || n.parentElement.closest('svg')) continue;
    range.selectNodeContents(n);
    const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
    if (lines.size > 1) out.broken.push(text);
  }
  const pre = document.createElement('pre');
  pre.id = 'layout';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"#;

#[test]
#[cfg_attr(not(has_chromium), ignore = "needs Chromium: apt-get install chromium")]
fn the_html_report_fits_a_1024_pixel_window_and_never_wraps_a_name() {
    let html = dual_stack_vpc()
        .args(["report", "-A", "-o", "html"])
        .run()
        .stdout
        .clone();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let page = dir.path().join("report.html");
    let measured = html.replace("</body>", &format!("{MEASURE}\n</body>"));
    std::fs::write(&page, &measured).expect("write the page");
    let dom = chromium_at(&page, &dir.path().join("profile"), "--dump-dom", "1024,768");
    let found = layout(&dom);
    assert_eq!(
        found["overflow"],
        serde_json::json!([]),
        "tables run off a 1024-px window: {found}"
    );
    assert!(
        found["scrollWidth"].as_u64() <= found["width"].as_u64(),
        "the page scrolls sideways: {found}"
    );
    assert_eq!(
        found["broken"],
        serde_json::json!([]),
        "names wrapped across lines: {found}"
    );
}

#[test]
#[cfg_attr(not(has_chromium), ignore = "needs Chromium: apt-get install chromium")]
fn the_html_report_writes_counts_as_the_tables_do_and_shows_subnets_and_holders_by_name() {
    let html = dual_stack_vpc()
        .args(["report", "-A", "-o", "html"])
        .run()
        .stdout
        .clone();
    let pools = between(&html, "<table id=\"pools\">", "</table>", "the pools table");
    // `pool list`'s formatter: a power of two minus what is missing, never 25 digits shown.
    assert!(pools.contains(">2^80 - "), "{pools}");
    let shown: String = pools
        .split('<')
        .filter_map(|tag| tag.split_once('>').map(|(_, text)| text))
        .collect();
    assert!(
        !shown
            .chars()
            .collect::<Vec<_>>()
            .windows(13)
            .any(|w| w.iter().all(char::is_ascii_digit)),
        "a count of 13 digits or more is shown: {shown}"
    );
    let section = between(
        &html,
        "id=\"pool-acme-dual-vpc-red-production-east-v6\"",
        "</section>",
        "the IPv6 pool's section",
    );
    let subnets = between(
        section,
        "<table class=\"subnets\">",
        "</table>",
        "a subnets table in the IPv6 pool's section",
    );
    assert!(subnets.contains("web-frontend-v6") && subnets.contains("fd00:70:0:1::1"));
    let v4 = between(
        &html,
        "id=\"pool-acme-dual-vpc-red-production-east\"",
        "</section>",
        "the IPv4 pool's section",
    );
    assert!(
        v4.contains("<code>10.70.1.2</code>"),
        "the reserved address"
    );
    // Every VM holds one address: the report says so and lists them by name, not by uid.
    assert!(section.contains("Every holder has 1 address"), "{section}");
    let holders = between(
        section,
        "<table class=\"holders\">",
        "</table>",
        "the holders table",
    );
    let first = holders.find("VirtualMachine/web-frontend-01/0");
    let last = holders.find("VirtualMachine/web-frontend-04/0");
    assert!(first.is_some() && first < last, "by name:\n{holders}");
}

#[test]
#[cfg_attr(not(has_chromium), ignore = "needs Chromium: apt-get install chromium")]
fn the_longest_names_scroll_a_table_inside_its_box_never_the_page() {
    let long = "a-pool-with-the-longest-name-a-pool-can-have-sixty-three-chars0";
    let manifest = format!(
        "apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata:\n  name: {long}\n  namespace: some-team/some-long-project\nspec:\n  cidr: \"fd00:1234:5678:9abc:def0:1234:5678:9a00/120\"\n  kind: private\n  zone: availability-zone-north-1\n"
    );
    let test = step(Test::new("empty").stdin(&manifest), &["apply", "-f", "-"]);
    let html = test
        .args(["report", "-A", "-o", "html"])
        .run()
        .stdout
        .clone();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let page = dir.path().join("report.html");
    std::fs::write(
        &page,
        html.replace("</body>", &format!("{MEASURE}\n</body>")),
    )
    .expect("write the page");
    let dom = chromium_at(&page, &dir.path().join("profile"), "--dump-dom", "1024,768");
    let found = layout(&dom);
    assert!(
        found["scrollWidth"].as_u64() <= found["width"].as_u64(),
        "the page scrolls sideways: {found}"
    );
    assert_eq!(
        found["broken"],
        serde_json::json!([]),
        "names wrapped across lines: {found}"
    );
}
