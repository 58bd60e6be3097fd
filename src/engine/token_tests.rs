//! The tokens file and the book: made, listed, revoked, and noticed by an open book.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use super::*;
use crate::model::Namespace;

fn new(name: &str, namespaces: &[&str], verbs: &[&str]) -> NewToken {
    NewToken {
        name: name.into(),
        namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
        verbs: verbs.iter().map(|s| s.to_string()).collect(),
        cluster: false,
    }
}

/// Asks `book` about `secret` until `want(result)` or 3 s pass; whether it came.
fn within(book: &TokenBook, secret: &str, want: impl Fn(&Result<Caller>) -> bool) -> Duration {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if want(&book.authenticate(secret)) {
            return start.elapsed();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the book did not change within 5 s");
}

#[test]
fn a_created_token_authenticates_with_its_scope_and_nothing_else_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.yaml");
    let (record, secret) = create(&path, &new("acme", &["acme/*"], &["read", "claim"])).unwrap();
    assert_eq!(record.verbs, ["read", "claim"]);
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(secret.expose()), "{text}");
    assert!(text.contains(&String::from(secret.hash())), "{text}");

    let book = TokenBook::open(&path).unwrap();
    let caller = book.authenticate(secret.expose()).unwrap();
    assert_eq!(caller.name.as_str(), "acme");
    let prod = Namespace::new("acme/prod").unwrap();
    assert!(caller.scope.sees(Some(&prod)) && !caller.scope.cluster());
    assert!(caller.scope.holds(Verb::Claim) && !caller.scope.holds(Verb::Admin));
    let mut wrong = secret.expose().to_owned();
    wrong.pop();
    wrong.push(if secret.expose().ends_with('0') {
        '1'
    } else {
        '0'
    });
    for bad in ["", "Bearer x", wrong.as_str(), &String::from(secret.hash())] {
        assert!(
            matches!(book.authenticate(bad), Err(Error::Unauthenticated { .. })),
            "{bad}"
        );
    }
}

#[test]
fn create_refuses_a_duplicate_a_bad_pattern_and_a_bad_verb_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.yaml");
    create(&path, &new("a", &["acme"], &["read"])).unwrap();
    let before = std::fs::read(&path).unwrap();
    let dup = create(&path, &new("a", &["other"], &["read"])).unwrap_err();
    assert_eq!(dup.exit_code(), crate::error::exit::CONFLICT, "{dup}");
    let pattern = create(&path, &new("b", &["Acme/*"], &["read"])).unwrap_err();
    assert_eq!(
        pattern.exit_code(),
        crate::error::exit::INVALID,
        "{pattern}"
    );
    let verb = create(&path, &new("b", &["acme"], &["write"])).unwrap_err();
    assert!(verb.to_string().contains("unknown verb `write`"), "{verb}");
    let none = create(&path, &new("b", &[], &["read"])).unwrap_err();
    assert_eq!(none.exit_code(), crate::error::exit::INVALID, "{none}");
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let unknown = revoke(&path, "zz").unwrap_err();
    assert_eq!(
        unknown.exit_code(),
        crate::error::exit::NOT_FOUND,
        "{unknown}"
    );
    assert_eq!(std::fs::read(&path).unwrap(), before);
}

#[test]
fn an_open_book_notices_a_revocation_and_a_new_token_within_two_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.yaml");
    let (_, a) = create(&path, &new("a", &["acme"], &["read"])).unwrap();
    let book = TokenBook::open(&path).unwrap();
    assert!(book.authenticate(a.expose()).is_ok());
    let (_, b) = create(&path, &new("b", &["beta"], &["claim"])).unwrap();
    let took = within(&book, b.expose(), |r| r.is_ok());
    assert!(took <= Duration::from_secs(2), "{took:?}");
    revoke(&path, "a").unwrap();
    let took = within(&book, a.expose(), |r| {
        matches!(r, Err(Error::Unauthenticated { .. }))
    });
    assert!(took <= Duration::from_secs(2), "{took:?}");
    assert!(book.authenticate(b.expose()).is_ok());
}

#[test]
fn a_book_keeps_its_copy_through_a_short_break_then_fails_closed_and_at_once_when_others_may_read()
{
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.yaml");
    let (_, a) = create(&path, &new("a", &["acme"], &["read"])).unwrap();
    let book = TokenBook::open(&path).unwrap();
    // Half-written by hand: the last good copy stays in use for a while, then nobody is
    // accepted (closed, not open), until the file is good again.
    std::fs::write(&path, "apiVersion: [").unwrap();
    std::thread::sleep(RECHECK + Duration::from_millis(100));
    assert!(book.authenticate(a.expose()).is_ok());
    let took = within(
        &book,
        a.expose(),
        |r| matches!(r, Err(Error::Unauthenticated { message }) if message.contains("no token is accepted")),
    );
    assert!(
        took >= GRACE - RECHECK - Duration::from_millis(200),
        "{took:?}"
    );
    std::fs::remove_file(&path).unwrap();
    let (_, a) = create(&path, &new("a", &["acme"], &["read"])).unwrap();
    within(&book, a.expose(), |r| r.is_ok());
    // Removed: the same.
    std::fs::remove_file(&path).unwrap();
    within(&book, a.expose(), |r| r.is_err());
    // Readable by others: nobody, at once, until it is private again.
    let (_, a) = create(&path, &new("a", &["acme"], &["read"])).unwrap();
    within(&book, a.expose(), |r| r.is_ok());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let refused = |r: &Result<Caller>| matches!(r, Err(Error::Unauthenticated { message }) if message.contains("mode 0644"));
    within(&book, a.expose(), refused);
    let open = TokenBook::open(&path).unwrap_err();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    within(&book, a.expose(), |r| r.is_ok());
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert!(
        open.to_string()
            .contains("group or others may read or write it"),
        "{open}"
    );
    assert_eq!(open.exit_code(), crate::error::exit::INVALID);
}

#[test]
fn a_symlink_or_a_fifo_at_the_path_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real.yaml");
    create(&real, &new("a", &["acme"], &["read"])).unwrap();
    let before = std::fs::read(&real).unwrap();
    let link = dir.path().join("link.yaml");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let e = create(&link, &new("b", &["acme"], &["read"])).unwrap_err();
    assert!(e.to_string().contains("symbolic link"), "{e}");
    assert!(TokenBook::open(&link).is_err());
    assert_eq!(std::fs::read(&real).unwrap(), before);
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let e = list(&fifo).unwrap_err();
    assert!(e.to_string().contains("not a regular file"), "{e}");
}
