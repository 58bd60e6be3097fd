//! The GraphQL schema as `ipamctl serve --print-schema` prints it is committed as
//! `schema/ipamctl.graphql` and holds every name of issue 42's contract. Regenerate the file
//! with `IPAMCTL_BLESS=1 cargo test --test serve_schema`.

use std::path::Path;
use std::process::Command;

fn printed() -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ipamctl"))
        .args(["serve", "--print-schema"])
        .output()
        .expect("run ipamctl serve --print-schema");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8")
}

#[test]
fn the_committed_schema_is_up_to_date() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schema/ipamctl.graphql");
    let text = printed();
    if std::env::var_os("IPAMCTL_BLESS").is_some() {
        std::fs::write(&path, &text).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == text,
        "schema/ipamctl.graphql is stale; run IPAMCTL_BLESS=1 cargo test --test serve_schema"
    );
}

#[test]
fn the_schema_holds_the_contracts_names() {
    let sdl = printed();
    for name in [
        "pools(namespace: String, allNamespaces: Boolean): [Pool!]!",
        "pool(name: String!, namespace: String): Pool",
        // Issue 43 added `list`'s other selectors as one optional argument after these.
        "allocations(namespace: String, allNamespaces: Boolean, pool: String, owner: String, uid: String, mac: String, selectors: Selectors): [Allocation!]!",
        "subnets(namespace: String, pool: String): [Subnet!]!",
        "vpc(name: String!, namespace: String!): Vpc",
        "vpcs(namespace: String, allNamespaces: Boolean): [Vpc!]!",
        // `--explain` through a server added an optional argument after `input`.
        "allocate(input: AllocateInput!, explain: Boolean): Claim!",
        "allocateMany(inputs: [AllocateInput!]!): [ClaimOutcome!]!",
        "release(input: ReleaseInput!): Int!",
        "enum Action {",
        "WOULD_CREATE",
        "prefixLength: Int",
        "ignoreNotFound: Boolean",
    ] {
        assert!(sdl.contains(name), "the schema lacks `{name}`:\n{sdl}");
    }
}
