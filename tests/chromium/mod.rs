//! Headless Chromium (Debian's `chromium`, installed by `.ci/run`) for the tests that load
//! a page or an image in a browser: the report, the maps.

use std::path::Path;
use std::process::Command;

/// Runs headless Chromium on `page` with `action` (`--dump-dom`, `--screenshot=…`) in a
/// window of `size` (`WIDTH,HEIGHT`), with its profile in `profile`; its stdout. Panics,
/// saying how to install it, when Chromium cannot be run, and on a failure.
pub fn run(page: &Path, profile: &Path, action: &str, size: &str) -> String {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--disable-sync",
            "--disable-component-update",
        ])
        .arg(format!("--window-size={size}"))
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
