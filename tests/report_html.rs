//! `ipamctl report -o html` loaded in headless Chromium (Debian's `chromium`, installed by
//! `.ci/run`): the page the browser builds holds every pool's row, section, map, free ranges
//! and largest holders, loads nothing from anywhere, and renders to a screenshot. Without
//! Chromium this test fails, saying how to install it.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Test, uid};

/// Runs headless Chromium on `page` with `action` (`--dump-dom`, `--screenshot=…`); its
/// stdout.
fn chromium(page: &Path, profile: &Path, action: &str) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-sync",
            "--disable-component-update",
            "--window-size=1200,1600",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(action)
        .arg(format!("file://{}", page.display()))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("chromium cannot be run ({e}): apt-get install chromium (.ci/run does)")
        });
    assert!(
        out.status.success(),
        "chromium {action}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 DOM")
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
    let rows = dom
        .split("<tbody>")
        .nth(1)
        .and_then(|t| t.split("</tbody>").next())
        .expect("the pools table has a body");
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
    assert!(dom.contains("<p id=\"summary\">3 pools, 7 allocations.</p>"));

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
