//! `dns export` for a CI job that renders from a fresh checkout: SOA serials that never go
//! back whatever directory the zones are rendered into (both stores), a `named.conf` that
//! names zone files relative to `--zone-dir` and survives a quote in any path, a foreign zone
//! never given a lower serial, `--ns` required up front, and an `--out` that opens nothing it
//! did not make (a planted FIFO, symlink or device at any path is refused, naming it).

mod host;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use host::{Lab, validates};

const ZONE: &str = "lab.example.com";

/// The arguments of `dns export` of every pool into `out`.
fn export_args(out: &Path) -> Vec<&str> {
    vec![
        "dns",
        "export",
        "--zone",
        ZONE,
        "--out",
        out.to_str().expect("UTF-8"),
        "--ns",
        "ns1.example.net",
        "--reverse-enclosing",
    ]
}

/// `dns export` of every pool into `out` (extra arguments after).
fn export(lab: &Lab, out: &Path, extra: &[&str]) -> Output {
    let mut args = export_args(out);
    args.extend(extra);
    lab.run(&args)
}

#[track_caller]
fn export_ok(lab: &Lab, out: &Path, extra: &[&str]) -> String {
    let o = export(lab, out, extra);
    assert!(
        o.status.success(),
        "dns export: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).expect("UTF-8")
}

/// The serial of every zone file in `dir`, by file name.
fn serials(dir: &Path) -> Vec<(String, u32)> {
    let mut out: Vec<(String, u32)> = std::fs::read_dir(dir)
        .expect("read the zones")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "zone"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read a zone");
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                serial(&text),
            )
        })
        .collect();
    out.sort();
    out
}

fn serial(text: &str) -> u32 {
    let line = text
        .lines()
        .find(|l| l.ends_with(" ; serial"))
        .unwrap_or_else(|| panic!("no serial in:\n{text}"));
    line.split_whitespace()
        .next()
        .unwrap()
        .parse()
        .expect("a number")
}

/// Every zone file of `dir` through `named-checkzone`.
fn check_zones(dir: &Path) {
    for (file, _) in serials(dir) {
        let zone = file.strip_suffix(".zone").unwrap();
        validates("named-checkzone", &[Path::new(zone), &dir.join(&file)]);
    }
}

/// Three renders into three fresh directories, a new NIC before the third: the serials of
/// the second are the first's (same records), every serial of the third is higher.
fn serials_never_go_back(lab: &Lab) {
    let dirs: Vec<PathBuf> = (1..=3)
        .map(|n| lab.tmp.path().join(format!("render-{n}")))
        .collect();
    export_ok(lab, &dirs[0], &[]);
    export_ok(lab, &dirs[1], &[]);
    lab.nic("lab", "VirtualMachine/new/0", None);
    export_ok(lab, &dirs[2], &[]);
    let [a, b, c] = [0, 1, 2].map(|i| serials(&dirs[i]));
    assert_eq!(a, b, "same records, same serials");
    for ((file, before), (_, after)) in b.iter().zip(&c) {
        // The zones the new NIC is in rose; no zone went back.
        if file == "lab.example.com.zone" || file == "2.0.192.in-addr.arpa.zone" {
            assert!(after > before, "{file}: {before} then {after}");
        } else {
            assert!(after >= before, "{file}: {before} then {after}");
        }
    }
    // A fourth render into the first directory, which holds older files of the zones: the
    // third's serials, the unchanged zones' too (a deployment of either never goes back).
    export_ok(lab, &dirs[0], &[]);
    assert_eq!(serials(&dirs[0]), c);
    for dir in &dirs {
        check_zones(dir);
    }
}

#[test]
#[cfg_attr(
    not(has_named_checkzone),
    ignore = "needs named-checkzone: apt-get install bind9-utils"
)]
fn serials_never_go_back_across_fresh_directories() {
    serials_never_go_back(&Lab::new());
}

#[test]
#[cfg_attr(
    any(not(has_named_checkzone), not(has_postgres)),
    ignore = "needs named-checkzone: apt-get install bind9-utils; needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn serials_never_go_back_across_fresh_directories_on_postgres() {
    serials_never_go_back(&Lab::new().into_database());
}

#[test]
fn ns_is_required_and_the_usage_says_so() {
    let lab = Lab::new();
    let out = lab.tmp.path().join("zones");
    // Without the last three arguments: `--ns NAME` and `--reverse-enclosing`.
    let args = export_args(&out);
    let o = lab.run(&args[..args.len() - 3]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("--ns <NAME>"), "{err}");
    assert!(!out.exists(), "nothing written");
    let help = lab.stdout(&["dns", "export", "--help"]);
    assert!(
        help.contains("Usage: ipamctl dns export [OPTIONS] --zone <ZONE> --out <DIR> --ns <NAME>"),
        "{help}"
    );
}

/// The zone statements of a `named.conf`, as `named-checkconf -p` prints them.
#[cfg(has_named_checkconf)]
fn zone_statements(conf: &Path) -> Vec<String> {
    let out = Command::new("named-checkconf")
        .arg("-p")
        .arg(conf)
        .output()
        .expect("run named-checkconf");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "named-checkconf {}: {text}{}",
        conf.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter(|l| l.starts_with("zone "))
        .map(str::to_owned)
        .collect()
}

#[test]
#[cfg_attr(
    not(has_named_checkconf),
    ignore = "needs named-checkconf: apt-get install bind9-utils"
)]
fn named_conf_names_zone_files_in_the_zone_dir_and_a_quote_adds_no_zone() {
    #[cfg(has_named_checkconf)]
    {
        let lab = Lab::new();
        // A quote in --out: it is no part of named.conf any more.
        let out = lab
            .tmp
            .path()
            .join("x\"; }; zone \"evil.example\" { type primary; file \"/etc/passwd");
        export_ok(&lab, &out, &[]);
        let conf = std::fs::read_to_string(out.join("named.conf")).unwrap();
        assert!(
            conf.contains(
                "zone \"lab.example.com\" { type primary; file \"lab.example.com.zone\"; };\n"
            ),
            "{conf}"
        );
        assert_eq!(zone_statements(&out.join("named.conf")).len(), 4);
        // A quote and a backslash in --zone-dir: escaped, one file name each.
        let dir = "/var/lib/bind/a\"b\\c; zone \"evil.example\" {";
        export_ok(&lab, &out, &["--zone-dir", dir]);
        let zones = zone_statements(&out.join("named.conf"));
        assert_eq!(zones.len(), 4, "{zones:?}");
        assert!(zones.iter().all(|z| !z.contains("evil")), "{zones:?}");
        let conf = std::fs::read_to_string(out.join("named.conf")).unwrap();
        assert!(
            conf.contains(
                "file \"/var/lib/bind/a\\\"b\\\\c; zone \\\"evil.example\\\" {/lab.example.com.zone\";"
            ),
            "{conf}"
        );
        // named reads the zone from the directory named: load them all with -z, from a
        // directory with a quote in its name.
        let served = lab.tmp.path().join("bind\"zones");
        export_ok(&lab, &served, &["--zone-dir", served.to_str().unwrap()]);
        validates(
            "named-checkconf",
            &[Path::new("-z"), &served.join("named.conf")],
        );
        // A newline cannot be written in named.conf's strings: refused, nothing written.
        let o = export(&lab, &out, &["--zone-dir", "a\nb"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(err.contains("--zone-dir"), "{err}");
    }
}

const FOREIGN: &str = "\
$ORIGIN lab.example.com.
$TTL 300
@ IN SOA ns1.example.net. hostmaster.example.net. ( 2026120601 ; serial
    3600 900 1209600 300 )
@ IN NS ns1.example.net.
www IN A 192.0.2.80
";

#[test]
#[cfg_attr(
    not(has_named_checkzone),
    ignore = "needs named-checkzone: apt-get install bind9-utils"
)]
fn a_foreign_zone_is_never_rewritten_lower() {
    let lab = Lab::new();
    let out = lab.tmp.path().join("zones");
    std::fs::create_dir(&out).unwrap();
    let zone = out.join("lab.example.com.zone");
    std::fs::write(&zone, FOREIGN).unwrap();
    validates("named-checkzone", &[Path::new(ZONE), &zone]);
    // Refused, naming the file and its serial; the directory as it was.
    let o = export(&lab, &out, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&zone.display().to_string()) && err.contains("2026120601"),
        "{err}"
    );
    assert!(err.contains("--replace-foreign"), "{err}");
    assert_eq!(std::fs::read_to_string(&zone).unwrap(), FOREIGN);
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1);
    // Replaced when asked, above its serial, and above it again after a change.
    let printed = export_ok(&lab, &out, &["--replace-foreign"]);
    assert!(
        printed.contains("lab.example.com.zone configured"),
        "{printed}"
    );
    let first = serial(&std::fs::read_to_string(&zone).unwrap());
    assert!(first > 2_026_120_601, "{first}");
    check_zones(&out);
    lab.nic("lab", "VirtualMachine/new/0", None);
    export_ok(&lab, &out, &[]);
    let second = serial(&std::fs::read_to_string(&zone).unwrap());
    assert!(second > first, "{first} then {second}");
    // A foreign file whose serial cannot be read is refused even then.
    std::fs::write(&zone, "; not a zone\n").unwrap();
    let o = export(&lab, &out, &["--replace-foreign"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("no SOA serial"), "{err}");
    assert_eq!(std::fs::read_to_string(&zone).unwrap(), "; not a zone\n");
    // A named.conf someone else wrote: refused the same way, replaced when asked.
    std::fs::remove_file(&zone).unwrap();
    let conf = out.join("named.conf");
    std::fs::write(&conf, "options { directory \"/var/named\"; };\n").unwrap();
    let o = export(&lab, &out, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains(&conf.display().to_string()), "{err}");
    assert!(
        std::fs::read_to_string(&conf)
            .unwrap()
            .starts_with("options")
    );
    export_ok(&lab, &out, &["--replace-foreign"]);
    assert!(
        std::fs::read_to_string(&conf)
            .unwrap()
            .starts_with("// Written by")
    );
}

/// Runs `cmd`, killed if it takes longer than `limit`: the time it took, or `None` if killed.
fn bounded(mut cmd: Command, limit: Duration) -> (Option<Duration>, Output) {
    let start = Instant::now();
    let mut child: Child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn ipamctl");
    let took = loop {
        if child.try_wait().expect("wait").is_some() {
            break Some(start.elapsed());
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    (took, child.wait_with_output().expect("collect the output"))
}

#[test]
fn a_planted_fifo_symlink_or_device_at_any_path_is_refused_naming_it() {
    let lab = Lab::new();
    // The files of the export, from a first render.
    let first = lab.tmp.path().join("first");
    export_ok(&lab, &first, &[]);
    let mut names: Vec<String> = std::fs::read_dir(&first)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), 5, "{names:?}");
    let outside = lab.tmp.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let secret = outside.join("secret");
    std::fs::write(&secret, "secret\n").unwrap();
    // Past the second of the state's last change, so no run waits for it to settle.
    std::thread::sleep(Duration::from_millis(1100));
    let plants: [(&str, Plant); 5] = [
        ("a FIFO", |at, _| mkfifo(at)),
        ("a symlink to /dev/zero", |at, _| {
            std::os::unix::fs::symlink("/dev/zero", at).unwrap()
        }),
        ("a symlink to a file outside", |at, secret| {
            std::os::unix::fs::symlink(secret, at).unwrap()
        }),
        ("a hard link to a file outside", |at, secret| {
            std::fs::hard_link(secret, at).unwrap()
        }),
        ("a directory", |at, _| std::fs::create_dir(at).unwrap()),
    ];
    let mut plants = plants.to_vec();
    if cfg!(has_root) {
        plants.push(("a character device (/dev/zero's)", |at, _| mknod(at)));
    }
    let mut slowest = Duration::ZERO;
    let mut case = 0;
    // At --out itself, and at each file in it.
    let targets: Vec<Option<&str>> = std::iter::once(None)
        .chain(names.iter().map(|n| Some(n.as_str())))
        .collect();
    for target in &targets {
        for (what, plant) in &plants {
            if target.is_none() && *what == "a directory" {
                continue;
            }
            case += 1;
            let out = lab.tmp.path().join(format!("out-{case}"));
            let at = match target {
                None => out.clone(),
                Some(name) => {
                    std::fs::create_dir(&out).unwrap();
                    out.join(name)
                }
            };
            plant(&at, &secret);
            let mut cmd = lab.cmd(&export_args(&out));
            cmd.stdin(Stdio::null());
            let (took, o) = bounded(cmd, Duration::from_secs(10));
            let err = String::from_utf8_lossy(&o.stderr);
            let took = took
                .unwrap_or_else(|| panic!("{what} at {}: still running after 10 s", at.display()));
            slowest = slowest.max(took);
            assert_eq!(
                o.status.code(),
                Some(4),
                "{what} at {}: {err}",
                at.display()
            );
            assert!(
                err.contains(&format!("{}:", at.display()))
                    || err.contains(&format!("`{}`", at.display())),
                "{what} at {}: {err}",
                at.display()
            );
            assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
            // Nothing else was written beside it.
            if target.is_some() {
                let written: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
                assert_eq!(written.len(), 1, "{what} at {}", at.display());
            }
        }
    }
    eprintln!("{case} planted paths refused, the slowest in {slowest:?}");
    // A directory given as --out that is a symlink to a directory is refused too, and the
    // directory it points at is left empty.
    let link = lab.tmp.path().join("link");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let o = export(&lab, &link, &[]);
    assert_eq!(o.status.code(), Some(4));
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
}

/// Plants something at its first path (the second: a file outside, for links to it).
type Plant = fn(&Path, &Path);

fn mkfifo(at: &Path) {
    let status = Command::new("mkfifo").arg(at).status().expect("run mkfifo");
    assert!(status.success());
}

/// A character device node with /dev/zero's numbers (root only).
fn mknod(at: &Path) {
    let status = Command::new("mknod")
        .arg(at)
        .args(["c", "1", "5"])
        .status()
        .expect("run mknod");
    assert!(status.success());
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn on_postgres_an_export_waits_for_a_write_begun_before_the_newest_change() {
    let lab = Lab::new().into_database();
    let db = lab.database().expect("a database");
    let mut other = db.sql();
    // A write in flight: its event is dated when its transaction began, and not visible.
    let mut tx = other.transaction().expect("begin");
    tx.execute(
        "INSERT INTO ipamctl.events (client, action, namespace, kind, name, manifest)
         VALUES ('test', 'claimed', '', 'Test', 'in-flight', ''::bytea)",
        &[],
    )
    .expect("insert an event");
    std::thread::sleep(Duration::from_millis(1100));
    // A change after it began, committed: the newest the export can see.
    lab.nic("lab", "VirtualMachine/later/0", None);
    let out = lab.tmp.path().join("zones");
    let mut cmd = lab.cmd(&export_args(&out));
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Past the second of the newest change, the export still waits for the open write:
    // done now, its serial could be the one a render after the write's commit gets.
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().expect("wait").is_none(),
        "the export finished while a write begun before its serial's second was open"
    );
    tx.commit().expect("commit");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "still waiting");
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "{err}");
    assert!(serials(&out).iter().all(|(_, n)| *n > 1_700_000_000));
}

/// A subnet made, then removed, in a pool that holds NICs outside it: the forward zone
/// loses them (they lie in no subnet), then has them back; each render's serial is higher.
fn a_subnet_made_or_removed_raises_the_serial(lab: &Lab) {
    let forward = |n: usize| {
        let dir = lab.tmp.path().join(format!("subnet-{n}"));
        let o = export(lab, &dir, &[]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(dir.join("lab.example.com.zone")).unwrap();
        (serial(&text), text.contains("web-01-1 IN A 192.0.2.3"))
    };
    let (first, held) = forward(1);
    assert!(held);
    lab.ok(&[
        "subnet",
        "create",
        "high",
        "--pool",
        "lab",
        "--cidr",
        "192.0.2.128/25",
    ]);
    let (second, held) = forward(2);
    assert!(!held, "the NICs below .128 lie in no subnet now");
    assert!(second > first, "{first} then {second}");
    lab.ok(&["subnet", "delete", "high"]);
    let (third, held) = forward(3);
    assert!(held);
    assert!(third > second, "{second} then {third}");
}

#[test]
fn a_subnet_made_or_removed_raises_the_serial_on_the_file_store() {
    a_subnet_made_or_removed_raises_the_serial(&Lab::new());
}

#[test]
#[cfg_attr(
    not(has_postgres),
    ignore = "needs PostgreSQL: apt-get install postgresql (the tests start a throwaway server), or IPAMCTL_TEST_PG=URL"
)]
fn a_subnet_made_or_removed_raises_the_serial_on_postgres() {
    a_subnet_made_or_removed_raises_the_serial(&Lab::new().into_database());
}

#[test]
fn a_state_dated_in_the_future_is_refused_at_once() {
    let lab = Lab::new();
    let pool = lab.state().join("cluster/ipampools/lab.yaml");
    let status = Command::new("touch")
        .args(["-d", "@4000000000"])
        .arg(&pool)
        .status()
        .expect("run touch");
    assert!(status.success());
    let mut cmd = lab.cmd(&export_args(&lab.tmp.path().join("zones")));
    cmd.stdin(Stdio::null());
    let (took, o) = bounded(cmd, Duration::from_secs(5));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(took.is_some(), "still waiting after 5 s: {err}");
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(err.contains("ahead of the clock"), "{err}");
    assert!(!lab.tmp.path().join("zones").exists());
}
