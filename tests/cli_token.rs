//! `ipamctl token create|list|revoke` driven as a user and a script drive them: the secret
//! printed once and alone, never listed and never kept (only its hash), the file private
//! (0600) and written whole, concurrent creates all kept, a symlink at the path refused,
//! and each error one line with its exit code and the file left as it was.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::assert_one_error;

struct Tokens {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Tokens {
    fn new() -> Tokens {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.yaml");
        Tokens { _dir: dir, path }
    }

    fn dir(&self) -> &Path {
        self.path.parent().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        run_on(&self.path, args)
    }

    /// `token create NAME --namespace NS --verbs VERBS`: the secret it printed.
    fn create(&self, name: &str, ns: &str, verbs: &str) -> String {
        let out = self.run(&["create", name, "--namespace", ns, "--verbs", verbs]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
    }

    fn bytes(&self) -> Vec<u8> {
        std::fs::read(&self.path).unwrap()
    }
}

fn run_on(path: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ipamctl"));
    cmd.arg("token").args(&args[..1]).arg("--tokens").arg(path);
    cmd.args(&args[1..]).env_remove("IPAMCTL_TOKENS");
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `ipamctl_` and 64 lowercase hex digits, and a newline: nothing else.
fn assert_secret_alone(stdout: &str) -> &str {
    let secret = stdout.strip_suffix('\n').expect("one line");
    let digits = secret.strip_prefix("ipamctl_").expect("the prefix");
    assert_eq!(digits.len(), 64, "{stdout:?}");
    assert!(
        digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
        "{stdout:?}"
    );
    secret
}

/// SHA-256 of `text`, by `sha256sum` (a program nobody here wrote).
fn sha256sum(input: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("sha256sum")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    text(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

#[test]
fn create_prints_the_secret_alone_and_the_file_keeps_only_its_hash_mode_0600() {
    let t = Tokens::new();
    let out = t.run(&[
        "create",
        "acme",
        "-n",
        "acme/*",
        "--namespace",
        "beta",
        "--verbs",
        "read,claim",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let secret = assert_secret_alone(&stdout);
    assert_eq!(text(&out.stderr), "token/acme created\n");
    let mode = std::fs::metadata(&t.path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let kept = text(&t.bytes());
    assert!(!kept.contains(secret), "the secret is in the file:\n{kept}");
    assert!(
        !kept.contains(&secret["ipamctl_".len()..]),
        "the secret's digits are in the file:\n{kept}"
    );
    assert!(
        kept.contains(&format!("hash: sha256:{}", sha256sum(secret))),
        "{kept}"
    );
    // A second token has another secret.
    let other = t.create("beta", "beta", "read");
    assert_ne!(assert_secret_alone(&other), secret);
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(t.dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| n == "tokens.yaml" || n == ".tokens.yaml.lock"),
        "{names:?}"
    );
}

#[test]
fn list_shows_scopes_and_never_a_secret_or_its_hash() {
    let t = Tokens::new();
    let a = t.create("acme", "acme/*", "read,claim,admin");
    let out = t.run(&["create", "ops", "--cluster", "--verbs", "admin"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let b = text(&out.stdout);
    for format in [&[][..], &["-o", "json"], &["-o", "yaml"], &["-o", "wide"]] {
        let mut args = vec!["list"];
        args.extend_from_slice(format);
        let out = t.run(&args);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let listed = text(&out.stdout);
        for secret in [&a, &b] {
            let secret = secret.trim();
            assert!(!listed.contains(secret), "{listed}");
            assert!(!listed.contains(&sha256sum(secret)), "{listed}");
        }
        assert!(!listed.contains("sha256"), "{listed}");
        assert!(
            listed.contains("acme/*") && listed.contains("ops"),
            "{listed}"
        );
    }
    let out = t.run(&["list", "-o", "json"]);
    let items = common::list_items(&text(&out.stdout));
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["name"], "acme");
    assert_eq!(
        items[0]["verbs"],
        serde_json::json!(["read", "claim", "admin"])
    );
    assert_eq!(items[0]["cluster"], false);
    assert_eq!(items[1]["name"], "ops");
    assert_eq!(items[1]["cluster"], true);
    assert_eq!(items[1]["namespaces"], serde_json::json!([]));
    assert!(
        items[0]["creationTimestamp"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
    assert_eq!(items[0]["kind"], "Token");
    let out = t.run(&["list", "-o", "name"]);
    assert_eq!(text(&out.stdout), "token/acme\ntoken/ops\n");
}

#[test]
fn revoke_removes_the_token_and_an_unknown_name_is_exit_3() {
    let t = Tokens::new();
    let a = t.create("acme", "acme", "read");
    t.create("beta", "beta", "read");
    let out = t.run(&["revoke", "acme"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "token/acme revoked\n");
    let kept = text(&t.bytes());
    assert!(
        !kept.contains("name: acme") && kept.contains("name: beta"),
        "{kept}"
    );
    assert!(!kept.contains(&sha256sum(a.trim())), "{kept}");
    let before = t.bytes();
    let out = t.run(&["revoke", "acme"]);
    assert_eq!(out.status.code(), Some(3));
    assert_one_error(&text(&out.stderr));
    assert!(text(&out.stderr).contains("no token `acme`"));
    assert_eq!(t.bytes(), before);
    // No file at all: exit 3 for list and revoke, and none is made.
    let none = t.dir().join("none.yaml");
    for args in [&["list"][..], &["revoke", "x"]] {
        let out = run_on(&none, args);
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        assert_one_error(&text(&out.stderr));
        assert!(!none.exists());
    }
}

#[test]
fn bad_input_is_one_error_with_its_exit_code_and_the_file_unchanged() {
    let t = Tokens::new();
    t.create("acme", "acme", "read");
    let before = t.bytes();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["create", "acme", "-n", "x", "--verbs", "read"],
            4,
            "exists",
        ),
        (
            &["create", "b", "-n", "Acme/*", "--verbs", "read"],
            2,
            "namespace pattern",
        ),
        (
            &["create", "b", "-n", "a/*/b", "--verbs", "read"],
            2,
            "namespace pattern",
        ),
        (
            &["create", "b", "-n", "a", "--verbs", "read,write"],
            2,
            "unknown verb",
        ),
        (&["create", "b", "-n", "a", "--verbs", ""], 2, "verb"),
        (
            &["create", "B_1", "-n", "a", "--verbs", "read"],
            2,
            "token name",
        ),
        (&["create", "b", "--verbs", "read"], 2, "scope"),
        (&["create", "b", "-n", "a"], 2, "--verbs"),
    ];
    for (args, code, says) in cases {
        let out = t.run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
        if *code != 2 || !says.starts_with("--") {
            assert_one_error(&stderr);
        }
        assert_eq!(t.bytes(), before, "{args:?} changed the file");
    }
}

#[test]
fn a_file_others_may_read_is_refused_until_it_is_0600() {
    let t = Tokens::new();
    t.create("acme", "acme", "read");
    std::fs::set_permissions(&t.path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let before = t.bytes();
    for args in [
        &["list"][..],
        &["create", "b", "-n", "b", "--verbs", "read"],
        &["revoke", "acme"],
    ] {
        let out = t.run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_one_error(&stderr);
        assert!(
            stderr.contains("group or others may read or write it (mode 0640)"),
            "{stderr}"
        );
        assert!(stderr.contains("hint: chmod 600"), "{stderr}");
        assert_eq!(t.bytes(), before);
    }
    std::fs::set_permissions(&t.path, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(t.run(&["list"]).status.code(), Some(0));
}

#[test]
fn a_symlink_or_fifo_at_the_path_is_refused_and_nothing_behind_it_changes() {
    let t = Tokens::new();
    t.create("acme", "acme", "read");
    let before = t.bytes();
    let link = t.dir().join("link.yaml");
    std::os::unix::fs::symlink(&t.path, &link).unwrap();
    // A dangling one too: following it would create the file it points at.
    let dangling = t.dir().join("dangling.yaml");
    let target = t.dir().join("target.yaml");
    std::os::unix::fs::symlink(&target, &dangling).unwrap();
    for path in [&link, &dangling] {
        for args in [
            &["create", "b", "-n", "b", "--verbs", "read"][..],
            &["list"],
            &["revoke", "acme"],
        ] {
            let out = run_on(path, args);
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert_one_error(&stderr);
            assert!(stderr.contains("is a symbolic link"), "{stderr}");
        }
        assert!(
            std::fs::symlink_metadata(path)
                .unwrap()
                .file_type()
                .is_symlink()
        );
    }
    assert_eq!(t.bytes(), before);
    assert!(!target.exists());
    let fifo = t.dir().join("fifo.yaml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let started = Instant::now();
    let out = run_on(&fifo, &["create", "b", "-n", "b", "--verbs", "read"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("not a regular file"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "opening the FIFO waited"
    );
}

#[test]
fn eight_concurrent_creates_are_all_kept_and_each_secret_is_its_own() {
    let t = Tokens::new();
    let started = Instant::now();
    let children: Vec<_> = (0..8)
        .map(|i| {
            Command::new(env!("CARGO_BIN_EXE_ipamctl"))
                .args(["token", "create", &format!("t{i}"), "--tokens"])
                .arg(&t.path)
                .args(["-n", &format!("ns{i}"), "--verbs", "claim"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut secrets = Vec::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        secrets.push(assert_secret_alone(&text(&out.stdout)).to_owned());
    }
    assert!(started.elapsed() < Duration::from_secs(60));
    let out = t.run(&["list", "-o", "name"]);
    let names: Vec<String> = (0..8).map(|i| format!("token/t{i}\n")).collect();
    assert_eq!(text(&out.stdout), names.concat());
    let kept = text(&t.bytes());
    for secret in &secrets {
        assert!(kept.contains(&sha256sum(secret)), "{secret} lost:\n{kept}");
    }
    secrets.sort();
    secrets.dedup();
    assert_eq!(secrets.len(), 8);
}

/// Polls `book` with `secret` until `want` holds, for at most 5 s; how long it took.
fn until(
    book: &ipamctl::engine::token::TokenBook,
    secret: &str,
    want: impl Fn(bool) -> bool,
) -> Duration {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(5) {
        if want(book.authenticate(secret).is_ok()) {
            return started.elapsed();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the book did not change within 5 s");
}

#[test]
fn an_open_book_takes_a_revocation_and_a_new_token_from_the_command_within_two_seconds() {
    let t = Tokens::new();
    let a = t.create("acme", "acme/*", "read,claim");
    let book = ipamctl::engine::token::TokenBook::open(&t.path).unwrap();
    let caller = book.authenticate(a.trim()).unwrap();
    assert_eq!(caller.name.as_str(), "acme");
    let b = t.create("beta", "beta", "read");
    let took = until(&book, b.trim(), |ok| ok);
    assert!(
        took <= Duration::from_millis(2100),
        "new token after {took:?}"
    );
    let out = t.run(&["revoke", "acme"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let took = until(&book, a.trim(), |ok| !ok);
    assert!(
        took <= Duration::from_millis(2100),
        "revocation after {took:?}"
    );
    let refused = book.authenticate(a.trim()).unwrap_err();
    assert_eq!(
        refused.exit_code(),
        ipamctl::error::exit::DENIED,
        "{refused}"
    );
    assert!(book.authenticate(b.trim()).is_ok());
}

#[test]
fn a_book_never_misses_a_token_while_other_tokens_are_made_and_revoked() {
    let t = Tokens::new();
    let a = t.create("acme", "acme", "read");
    let book = ipamctl::engine::token::TokenBook::open(&t.path).unwrap();
    let stop = std::sync::atomic::AtomicBool::new(false);
    let churned = std::thread::scope(|s| {
        let churn = s.spawn(|| {
            let started = Instant::now();
            let mut rounds = 0;
            // Bounded by time and count: about 3 s of creates and revokes, one file each.
            while started.elapsed() < Duration::from_secs(3) && rounds < 200 {
                t.create(&format!("c{rounds}"), "churn", "read");
                let out = t.run(&["revoke", &format!("c{rounds}")]);
                assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
                rounds += 1;
            }
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            rounds
        });
        let mut asked = 0;
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let caller = book.authenticate(a.trim());
            assert!(caller.is_ok(), "refused mid-churn: {caller:?}");
            asked += 1;
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(asked > 100, "{asked}");
        churn.join().unwrap()
    });
    assert!(churned >= 5, "{churned} rounds");
}
