//! What a test needs from the machine beyond Rust and git. A test that runs an optional
//! tool carries `#[cfg_attr(not(has_TOOL), ignore = "needs …")]` (see `build.rs` and
//! `tests/tools.rs`), so it is skipped where the tool is missing and runs under `CI=true`;
//! [`require`] then makes it fail there at once, naming the tool, instead of letting a
//! shell's exit 127 pass unseen (`sh -c 'pv … > FILE'` without pv truncates FILE and exits
//! 127, which a writer loop that ignores its status never notices).

use std::process::{Command, Stdio};

/// Panics, saying how to install it, unless `tool` is on `PATH`: a skipped race proves
/// nothing, and a missing writer makes a storm test slow rather than wrong.
#[track_caller]
pub fn require(tool: &str) {
    let found = Command::new("sh")
        .args(["-c", "command -v \"$1\""])
        .arg("sh")
        .arg(tool)
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "this test needs `{tool}`, which is not on PATH ({}; .ci/run installs it)",
        install(tool)
    );
}

/// How to install `tool` on Debian: the package is not always named after the command.
fn install(tool: &str) -> String {
    match tool {
        "node" => "apt-get install nodejs".into(),
        "man" => "apt-get install man-db".into(),
        "named-checkzone" => "apt-get install bind9-utils".into(),
        "cargo-deb" => "cargo install --locked cargo-deb".into(),
        "kea-dhcp4" => "apt-get install kea-dhcp4-server".into(),
        "dnsmasq" => "apt-get install dnsmasq-base".into(),
        "promtool" => "apt-get install prometheus".into(),
        "psql" | "pg_ctl" | "initdb" => "apt-get install postgresql".into(),
        other => format!("apt-get install {other}"),
    }
}
