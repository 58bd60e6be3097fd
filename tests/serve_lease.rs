//! Leases through the server: `allocate`'s `ttl` claims a lease and renews it, and the
//! server's reaper (`--reap-interval`) releases what lapsed while it runs. File store, and
//! PostgreSQL with `IPAMCTL_TEST_STORE=postgres` (whose server's clock decides there).

mod common;
mod serve_common;

use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{Server, Store};

fn allocate(server: &Server, owner: &str, ttl: &str) -> String {
    let data = server.ok(
        "mutation($o: String!, $t: String) { allocate(input: {namespace: \"acme/prod\", pool: \"vpc-main\", owner: $o, ttl: $t}) { addresses } }",
        json!({"o": owner, "t": ttl}),
    );
    data["allocate"]["addresses"][0]
        .as_str()
        .unwrap()
        .to_owned()
}

fn held(server: &Server, owner: &str) -> bool {
    let data = server.ok(
        "query($o: String) { allocations(namespace: \"acme/prod\", owner: $o) { address } }",
        json!({"o": owner}),
    );
    !data["allocations"].as_array().unwrap().is_empty()
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn the_servers_reaper_releases_lapsed_leases_and_spares_renewed_ones() {
    let store = Store::fixture("demo");
    let server = Server::start(&store, &["--reap-interval", "1s", "--reap-grace", "0s"]);
    let short = allocate(&server, "Node/short", "1s");
    let kept = allocate(&server, "Node/kept", "1s");
    // The owner asking again with a TTL renews: the same address.
    let deadline = Instant::now() + Duration::from_secs(20);
    while held(&server, "Node/short") {
        assert!(
            Instant::now() < deadline,
            "the reaper never released the lapsed lease"
        );
        assert_eq!(allocate(&server, "Node/kept", "1h"), kept);
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(held(&server, "Node/kept"));
    assert!(
        server.log().contains("reaper: released"),
        "{}",
        server.log()
    );
    // Released, not renewed: asked again, the owner gets a new claim (the freed address is
    // free again, as this pool has no cooldown).
    let _ = short;
    allocate(&server, "Node/short", "1h");
    assert!(held(&server, "Node/short"));
    store.assert_check_clean();
}
