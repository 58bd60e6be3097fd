//! A batch line read into a request's input: the words a line that is not a request gets,
//! and what the batch's command line gives the lines that leave a field out.

use serde_json::json;

use super::{AllocateInput, AllocateRequest, Defaults, ReleaseInput, ReleaseRequest};
use crate::engine::scope::Scope;

fn allocate(line: serde_json::Value, defaults: &Defaults<'_>) -> Result<AllocateInput, String> {
    AllocateInput::read(line, defaults).map_err(|e| e.to_string())
}

#[test]
fn a_line_that_is_no_request_says_why() {
    let d = Defaults::default();
    for (line, says) in [
        (json!("vpc-main"), "a request is an object of fields"),
        (json!([1]), "a request is an object of fields"),
        (
            json!({"pool": "p", "colour": "red"}),
            "unknown field `colour`; a request has pool, pools, namespace",
        ),
        (
            json!({"pool": "p", "pools": ["q"]}),
            "`pool` and `pools` are one field",
        ),
        (
            json!({"pool": "p", "address": []}),
            "`address` is an empty list",
        ),
        (
            json!({"pool": "p", "owner": {"a": 1}}),
            "`owner` is a string or a list of strings",
        ),
        (
            json!({"pool": [["p"]], "owner": "X/y"}),
            "`pool` is a string or a list of strings",
        ),
        (
            json!({"pool": "p", "dryRun": "yes"}),
            "`dryRun` is true or false",
        ),
        (
            json!({"pool": "p", "owner": ["A/a", "B/b"]}),
            "the argument '--owner <KIND/NAME>' cannot be used multiple times",
        ),
        (
            json!({"pool": "p", "prefixLength": 300}),
            "invalid value '300' for '--prefix-length <N>': 300 is not in 0..=255",
        ),
    ] {
        let e = allocate(line.clone(), &d).expect_err(&line.to_string());
        assert!(e.contains(says), "{line}: {e}");
    }
}

#[test]
fn the_batchs_command_line_gives_what_a_line_leaves_out_but_not_what_it_nulls() {
    let d = Defaults {
        namespace: Some("acme/prod"),
        dry_run: true,
        ignore_not_found: true,
    };
    let got = allocate(json!({"pool": "p", "owner": "X/y", "dryRun": false}), &d).unwrap();
    assert_eq!(got.namespace.as_deref(), Some("acme/prod"));
    assert!(got.dry_run, "--dry-run makes every request a dry run");
    let got = allocate(json!({"zone": "z", "owner": "X/y", "namespace": null}), &d).unwrap();
    assert_eq!(got.namespace, None);
    let got = ReleaseInput::read(json!({"owner": "X/y"}), &d).unwrap();
    assert!(got.ignore_not_found);
    let got = ReleaseInput::read(json!({"owner": "X/y", "ignoreNotFound": null}), &d).unwrap();
    assert!(!got.ignore_not_found);
    let got = allocate(
        json!({"pool": "p", "owner": "X/y", "prefixLength": "24"}),
        &d,
    )
    .unwrap();
    assert_eq!(got.prefix_length, Some(24));
}

#[test]
fn the_constructor_refuses_what_the_command_lines_parser_refuses() {
    let d = Defaults::default();
    for (line, says) in [
        (json!({"pool": "p"}), "not provided: --owner <KIND/NAME>"),
        (json!({"owner": "FloatingIP/f"}), "not provided: <POOL>..."),
        (
            json!({"zone": "z", "pool": "p", "owner": "FloatingIP/f"}),
            "the argument '--zone <ZONE>' cannot be used with '[POOL]...'",
        ),
        (
            json!({"pool": "p", "owner": "X/y", "mac": "auto", "prefixLength": 24}),
            "the argument '--mac <MAC|auto>' cannot be used with '--prefix-length <N>'",
        ),
        (
            json!({"pool": "p", "namespace": "acme", "tenant": "acme", "owner": "FloatingIP/f"}),
            "the argument '--tenant <NS>' cannot be used with '--namespace <NS>'",
        ),
        (
            json!({"zone": "z", "tenant": "acme", "owner": "VirtualMachine/vm/0"}),
            "`--tenant` claims a floating IP: give `--owner FloatingIP/<name>`",
        ),
        (
            json!({"zone": "z", "tenant": "acme", "owner": "FloatingIP/beta/f"}),
            "invalid FloatingIP name `beta/f`",
        ),
        (
            json!({"pool": "p", "namespace": "acme", "owner": "FloatingIP/beta/f"}),
            "is tenant `beta`'s floating IP",
        ),
    ] {
        let input = allocate(line.clone(), &d).unwrap();
        let e = AllocateRequest::new(&input, &Scope::everything()).expect_err(&line.to_string());
        assert!(e.to_string().contains(says), "{line}: {e}");
    }
    let input = allocate(
        json!({"zone": "z", "tenant": "acme/prod", "owner": "FloatingIP/f"}),
        &d,
    );
    let tenant = AllocateRequest::new(&input.unwrap(), &Scope::everything()).unwrap();
    assert_eq!(tenant.owner().to_string(), "FloatingIP/acme/prod/f");
    let input = ReleaseInput::read(json!({"pool": ["p", "10.0.0.1"], "tenant": "acme"}), &d);
    let e = ReleaseRequest::new(&input.unwrap(), &Scope::everything()).unwrap_err();
    assert!(e.to_string().contains("guards it with `--owner"), "{e}");
    let input = ReleaseInput::read(json!({"owner": "X/y", "force": true}), &d).unwrap();
    let e = ReleaseRequest::new(&input, &Scope::everything()).unwrap_err();
    assert!(e.to_string().contains("<ADDRESS>"), "{e}");
}

#[test]
fn a_releases_pool_and_address_fill_the_two_positional_arguments_in_order() {
    let d = Defaults::default();
    let got = ReleaseInput::read(json!({"pool": ["v4", "10.0.0.1"], "force": true}), &d).unwrap();
    assert_eq!(got.pool.as_deref(), Some("v4"));
    assert_eq!(got.address.as_deref(), Some("10.0.0.1"));
    let e = ReleaseInput::read(json!({"pool": ["v4", "a"], "address": "b"}), &d).unwrap_err();
    assert!(
        e.to_string().contains("unexpected argument 'b' found"),
        "{e}"
    );
}
