//! Bad input: every validation error of the spec gets one `error:` line naming the file (or
//! flag), the field and the value, exit code 2, and leaves the state directory untouched.

mod common;

use common::{Test, code};

/// Applies `doc` on stdin to the seed state; it must be refused with exit 2 and change
/// nothing. Returns the error message.
#[track_caller]
fn apply_rejects(doc: &str) -> String {
    Test::new("seed")
        .args(["apply", "-f", "-"])
        .stdin(doc)
        .fails(code::INVALID)
        .run()
        .stderr
        .clone()
}

/// Runs `args` on the populated state; they must be refused with exit 2 and change nothing.
#[track_caller]
fn command_rejects(args: &[&str]) -> String {
    Test::new("populated")
        .args(args)
        .fails(code::INVALID)
        .run()
        .stderr
        .clone()
}

/// Runs `allocate vpc-main -n acme/prod --owner <owner> <extra>` on the populated state; it
/// must be refused with exit 2 and change nothing.
#[track_caller]
fn allocate_rejects(owner: &str, extra: &[&str]) -> String {
    let mut args = vec!["allocate", "vpc-main", "-n", "acme/prod", "--owner", owner];
    args.extend_from_slice(extra);
    command_rejects(&args)
}

/// A public pool with the given `metadata` lines (after `name`) and `spec` lines.
fn pool(name: &str, metadata: &str, spec: &str) -> String {
    format!(
        "apiVersion: pivirt.hu/v1
kind: IPAMPool
metadata:
  name: {name}
{metadata}spec:
{spec}"
    )
}

const PUBLIC: &str = "  cidr: 192.0.2.0/24\n  kind: public\n";

// --- manifests (apply) ---------------------------------------------------------------

#[test]
fn unknown_spec_field_is_refused_not_ignored() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  excludes: [192.0.2.5]\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: line 8 column 3: unknown field `excludes`, expected one of cidr, kind, prefixLengths, gateway, exclude, zone, reuseAfter, macPrefix, pick, dhcp");
}

#[test]
fn unknown_metadata_field_is_refused() {
    let err = apply_rejects(&pool("edge", "  owner: me\n", PUBLIC));
    assert!(err.contains("unknown field `owner`"), "{err}");
}

#[test]
fn unknown_top_level_field_is_refused() {
    let err = apply_rejects(&format!("{}status: {{}}\n", pool("edge", "", PUBLIC)));
    assert!(err.contains("unknown field `status`"), "{err}");
}

#[test]
fn cidr_with_host_bits_suggests_the_prefix_meant() {
    let err = apply_rejects(&pool("edge", "", "  cidr: 192.0.2.77/24\n  kind: public\n"));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: line 6 column 9: `192.0.2.77/24` has host bits set; did you mean `192.0.2.0/24`?");
}

#[test]
fn errors_in_later_documents_name_the_document_and_stream_line() {
    let input = format!(
        "{}---\n{}",
        pool("edge-a", "", PUBLIC),
        pool("edge-b", "", "  cidr: 198.51.100.1/24\n  kind: public\n")
    );
    let err = apply_rejects(&input);
    insta::assert_snapshot!(err, @"error: <stdin>: document 2: line 14 column 9: `198.51.100.1/24` has host bits set; did you mean `198.51.100.0/24`?");
}

#[test]
fn errors_name_the_file_they_come_from() {
    let test = Test::new("seed");
    let file = test.input(
        "pools.yaml",
        &pool("edge", "", "  cidr: 10.1.0.0/8\n  kind: public\n"),
    );
    let ran = test.args(["apply", "-f", &file]).fails(code::INVALID).run();
    insta::assert_snapshot!(ran.stderr, @"error: pools.yaml: document 1: line 6 column 9: `10.1.0.0/8` has host bits set; did you mean `10.0.0.0/8`?");
}

#[test]
fn gateway_outside_the_prefix_is_refused() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  gateway: 192.0.3.1\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: spec.gateway: `192.0.3.1` is outside `192.0.2.0/24`");
}

#[test]
fn exclude_address_outside_the_prefix_is_refused() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  exclude: [192.0.2.9, 192.0.3.9]\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: spec.exclude: `192.0.3.9` is outside `192.0.2.0/24`");
}

#[test]
fn exclude_cidr_reaching_outside_the_prefix_is_refused() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  exclude: [192.0.2.0/23]\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: spec.exclude: `192.0.2.0/23` is outside `192.0.2.0/24`");
}

#[test]
fn exclude_cidr_with_host_bits_is_refused() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  exclude: [192.0.2.9/28]\n",
    ));
    assert!(err.contains("did you mean `192.0.2.0/28`?"), "{err}");
}

#[test]
fn public_pool_with_a_namespace_is_refused() {
    let err = apply_rejects(&pool("edge", "  namespace: acme/prod\n", PUBLIC));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: metadata.namespace: a public pool is cluster-scoped and has no namespace, found `acme/prod`");
}

#[test]
fn private_pool_without_a_namespace_is_refused() {
    let err = apply_rejects(&pool("edge", "", "  cidr: 10.1.0.0/16\n  kind: private\n"));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: metadata.namespace: a private pool needs a namespace (the VPC's tenant namespace)");
}

#[test]
fn unknown_pool_kind_is_refused() {
    let err = apply_rejects(&pool("edge", "", "  cidr: 10.1.0.0/16\n  kind: shared\n"));
    assert!(err.contains("`shared`"), "{err}");
    assert!(err.contains("public, private"), "{err}");
}

#[test]
fn uppercase_pool_name_is_refused() {
    let err = apply_rejects(&pool("Edge", "", PUBLIC));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: metadata.name: invalid pool name `Edge`: contains 'E'; only lowercase letters, digits and `-` are allowed (RFC 1123 label)");
}

#[test]
fn pool_name_longer_than_63_characters_is_refused() {
    let err = apply_rejects(&pool(&"a".repeat(64), "", PUBLIC));
    assert!(
        err.contains("is 64 characters long; at most 63 are allowed"),
        "{err}"
    );
}

#[test]
fn pool_name_of_63_characters_is_accepted() {
    let name = "a".repeat(63);
    Test::new("seed")
        .args(["apply", "-f", "-"])
        .stdin(&pool(&name, "", PUBLIC))
        .stdout(&format!("ipampool/{name} created\n"))
        .run();
}

#[test]
fn pool_name_with_a_dot_or_leading_dash_is_refused() {
    apply_rejects(&pool("edge.a", "", PUBLIC));
    apply_rejects(&pool("-edge", "", PUBLIC));
    apply_rejects(&pool("\"\"", "", PUBLIC));
}

#[test]
fn namespace_with_an_uppercase_segment_is_refused() {
    let err = apply_rejects(&pool(
        "vpc",
        "  namespace: acme/Prod\n",
        "  cidr: 10.1.0.0/16\n  kind: private\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: line 5 column 14: invalid namespace `acme/Prod`: segment `Prod` contains 'P'; only lowercase letters, digits and `-` are allowed (RFC 1123 label)");
}

#[test]
fn namespace_with_empty_or_dot_segments_is_refused() {
    let private = "  cidr: 10.1.0.0/16\n  kind: private\n";
    apply_rejects(&pool("vpc", "  namespace: acme//prod\n", private));
    apply_rejects(&pool("vpc", "  namespace: /acme\n", private));
    apply_rejects(&pool("vpc", "  namespace: acme/..\n", private));
    apply_rejects(&pool("vpc", "  namespace: acme/\n", private));
}

#[test]
fn namespace_segment_ipampools_is_refused() {
    let err = apply_rejects(&pool(
        "vpc",
        "  namespace: acme/ipampools\n",
        "  cidr: 10.1.0.0/16\n  kind: private\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: line 5 column 14: invalid namespace `acme/ipampools`: segment `ipampools` is reserved by the state directory layout");
}

#[test]
fn namespace_segment_ipallocations_is_refused() {
    let err = apply_rejects(&pool(
        "vpc",
        "  namespace: ipallocations\n",
        "  cidr: 10.1.0.0/16\n  kind: private\n",
    ));
    assert!(err.contains("segment `ipallocations` is reserved"), "{err}");
}

#[test]
fn an_ipv6_cidr_that_is_no_prefix_is_refused() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 2001:db8::/129\n  kind: public\n",
    ));
    insta::assert_snapshot!(err, @"error: <stdin>: document 1: line 6 column 9: `2001:db8::/129` is not a prefix like `10.0.0.0/16` or `fd00:42::/48`");
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 2001:db8::1/64\n  kind: public\n",
    ));
    assert!(err.contains("did you mean `2001:db8::/64`?"), "{err}");
}

#[test]
fn an_ipv6_gateway_or_exclude_in_an_ipv4_pool_is_refused() {
    let gw = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  gateway: 2001:db8::1\n",
    ));
    assert!(gw.contains("`2001:db8::1` is an IPv6 address"), "{gw}");
    let ex = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  kind: public\n  exclude: [\"2001:db8::1\"]\n",
    ));
    assert!(ex.contains("`2001:db8::1` is an IPv6 address"), "{ex}");
}

#[test]
fn unsupported_api_version_is_refused() {
    let err = apply_rejects(&pool("edge", "", PUBLIC).replace("pivirt.hu/v1", "pivirt.hu/v2"));
    assert!(
        err.contains("apiVersion: `pivirt.hu/v2` is not supported"),
        "{err}"
    );
}

#[test]
fn unknown_kind_of_object_is_refused() {
    let err = apply_rejects(&pool("edge", "", PUBLIC).replace("kind: IPAMPool", "kind: Pool"));
    assert!(err.contains("kind: `Pool` is not supported"), "{err}");
}

#[test]
fn yaml_syntax_error_is_refused_with_its_position() {
    let err = apply_rejects("apiVersion: pivirt.hu/v1\nkind: IPAMPool\nmetadata: {name: [\n");
    assert!(
        err.starts_with("error: <stdin>: document 1: line "),
        "{err}"
    );
}

#[test]
fn duplicate_keys_are_refused() {
    let err = apply_rejects(&pool(
        "edge",
        "",
        "  cidr: 192.0.2.0/24\n  cidr: 198.51.100.0/24\n  kind: public\n",
    ));
    assert!(err.contains("cidr"), "{err}");
}

// --- flags --------------------------------------------------------------------------

#[test]
fn unknown_owner_kind_is_refused() {
    let err = command_rejects(&["allocate", "public-zone-a", "--owner", "Pod/web-0"]);
    insta::assert_snapshot!(err, @"error: --owner: unknown owner kind `Pod`; expected one of VirtualMachine, FloatingIP, VPC, Node");
}

#[test]
fn owner_without_a_kind_is_refused() {
    let err = command_rejects(&["allocate", "public-zone-a", "--owner", "web-01"]);
    assert!(err.contains("must be `KIND/NAME`"), "{err}");
}

#[test]
fn virtual_machine_name_needs_a_nic_index() {
    let err = allocate_rejects("VirtualMachine/web-01", &[]);
    insta::assert_snapshot!(err, @"error: --owner: invalid VirtualMachine name `web-01`: must be `<hostname>/<nic index>`, e.g. `web-01/0`");
}

#[test]
fn virtual_machine_nic_index_must_be_a_number() {
    let err = allocate_rejects("VirtualMachine/web-01/eth0", &[]);
    assert!(err.contains("NIC index `eth0`"), "{err}");
}

#[test]
fn virtual_machine_hostname_must_be_lowercase() {
    let err = allocate_rejects("VirtualMachine/Web-01/0", &[]);
    assert!(err.contains("hostname `Web-01`"), "{err}");
}

#[test]
fn vpc_owner_name_must_be_router() {
    let err = command_rejects(&["allocate", "public-zone-a", "--owner", "VPC/edge"]);
    insta::assert_snapshot!(err, @"error: --owner: invalid VPC name `edge`: must be `router` (a VPC holds one address per pool: its router's uplink)");
}

#[test]
fn floating_ip_owner_name_must_be_a_label() {
    let err = command_rejects(&["allocate", "public-zone-a", "--owner", "FloatingIP/Fip_1"]);
    assert!(err.contains("invalid FloatingIP name `Fip_1`"), "{err}");
}

#[test]
fn node_owner_name_must_be_a_subnet() {
    let err = allocate_rejects("Node/10.42.1.1/24", &[]);
    assert!(err.contains("did you mean `10.42.1.0/24`?"), "{err}");
}

#[test]
fn owner_is_validated_in_release_and_list_filters_too() {
    command_rejects(&["release", "public-zone-a", "--owner", "VPC/edge"]);
    command_rejects(&["list", "--owner", "Pod/x"]);
}

#[test]
fn invalid_uid_is_refused() {
    let err = command_rejects(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/fip-9",
        "--uid",
        "a uid with spaces",
    ]);
    assert!(err.starts_with("error: --uid: invalid uid"), "{err}");
}

#[test]
fn uppercase_pool_name_on_the_command_line_is_refused() {
    let err = command_rejects(&["allocate", "Public", "--owner", "FloatingIP/fip-9"]);
    assert!(
        err.starts_with("error: POOL: invalid pool name `Public`"),
        "{err}"
    );
}

#[test]
fn invalid_namespace_flag_is_refused() {
    let err = command_rejects(&["list", "-n", "Acme"]);
    insta::assert_snapshot!(err, @"error: --namespace: invalid namespace `Acme`: segment `Acme` contains 'A'; only lowercase letters, digits and `-` are allowed (RFC 1123 label)");
}

#[test]
fn namespace_flag_with_reserved_segment_is_refused() {
    let err = command_rejects(&[
        "allocate",
        "vpc-main",
        "-n",
        "acme/ipampools",
        "--owner",
        "VPC/router",
    ]);
    assert!(err.contains("segment `ipampools` is reserved"), "{err}");
}

#[test]
fn namespace_flag_with_path_tricks_is_refused() {
    command_rejects(&["list", "-n", "../etc"]);
    command_rejects(&["list", "-n", "/etc"]);
    command_rejects(&["pool", "show", "vpc-main", "-n", "acme/../../x"]);
}

#[test]
fn ipv6_address_flags_on_an_ipv4_pool_are_refused() {
    let err = command_rejects(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/fip-9",
        "--address",
        "2001:db8::7",
    ]);
    insta::assert_snapshot!(err, @"error: --address: 2001:db8::7 is not a candidate of this request: it is outside the pool's prefix 203.0.113.0/24");
    command_rejects(&["release", "public-zone-a", "2001:db8::7"]);
    command_rejects(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/fip-9",
        "--reserved",
        "::1",
    ]);
}

#[test]
fn ipv6_within_on_an_ipv4_pool_is_refused() {
    let err = command_rejects(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/fip-9",
        "--within",
        "2001:db8::/64",
    ]);
    assert!(
        err.contains("`2001:db8::/64` does not lie inside pool `public-zone-a` (203.0.113.0/24)"),
        "{err}"
    );
}

#[test]
fn within_with_host_bits_suggests_the_prefix_meant() {
    let err = allocate_rejects("VPC/router", &["--within", "10.42.1.9/24"]);
    insta::assert_snapshot!(err, @"error: --within: `10.42.1.9/24` has host bits set; did you mean `10.42.1.0/24`?");
}

#[test]
fn malformed_address_is_refused() {
    let err = command_rejects(&["release", "public-zone-a", "203.0.113.300"]);
    assert!(
        err.contains("`203.0.113.300` is not an IP address like `10.0.0.1` or `2001:db8::1`"),
        "{err}"
    );
}

#[test]
fn unknown_subcommand_and_flag_are_usage_errors() {
    for args in [
        &["frobnicate"][..],
        &["list", "--bogus"],
        &["list", "-o", "xml"],
    ] {
        let ran = Test::new("populated")
            .args(args)
            .status(code::INVALID)
            .run();
        assert!(ran.stderr.starts_with("error: "), "{}", ran.stderr);
        assert_eq!(ran.stdout, "");
    }
}

#[test]
fn namespace_and_all_namespaces_together_are_a_usage_error() {
    let ran = Test::new("populated")
        .args(["list", "-n", "acme/prod", "-A"])
        .status(code::INVALID)
        .run();
    assert!(ran.stderr.contains("cannot be used with"), "{}", ran.stderr);
}

#[test]
fn a_uid_must_be_a_uuid_and_bashs_uid_is_named() {
    let err = command_rejects(&[
        "allocate",
        "public-zone-a",
        "--owner",
        "FloatingIP/fip-9",
        "--uid",
        "0",
    ]);
    assert!(
        err.starts_with("error: --uid: invalid uid `0`: a uid must be a UUID"),
        "{err}"
    );
    assert!(
        err.contains("`$UID`, which in bash is the user id"),
        "{err}"
    );
    for not_uuid in [
        "vm-1",
        "0f8fad5bd9cb469fa16570867728950e",
        "{0f8fad5b-d9cb-469f-a165-70867728950e}",
    ] {
        let err = command_rejects(&["release", "--uid", not_uuid]);
        assert!(err.contains(&format!("invalid uid `{not_uuid}`")), "{err}");
        assert!(!err.contains("$UID"), "{err}");
    }
    command_rejects(&[
        "vpc",
        "create",
        "x",
        "-n",
        "acme/x",
        "--cidr",
        "10.9.0.0/16",
        "--uid",
        "1000",
    ]);
}

#[test]
fn an_uppercase_uuid_is_the_same_owner_stored_lowercase() {
    const UPPER: &str = "0F8FAD5B-D9CB-469F-A165-70867728950E";
    let ran = Test::new("seed")
        .args([
            "allocate",
            "public-zone-a",
            "--owner",
            "FloatingIP/fip-9",
            "--uid",
            UPPER,
        ])
        .stdout("203.0.113.4\n")
        .run();
    assert!(
        ran.read("cluster/ipallocations/public-zone-a-203-0-113-4.yaml")
            .contains("uid: 0f8fad5b-d9cb-469f-a165-70867728950e\n")
    );
    ran.then()
        .args([
            "allocate",
            "public-zone-a",
            "--owner",
            "FloatingIP/fip-9",
            "--uid",
            &UPPER.to_lowercase(),
        ])
        .stdout("203.0.113.4\n")
        .unchanged()
        .run();
}
