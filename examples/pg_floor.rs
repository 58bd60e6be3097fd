//! The floor under every command on the PostgreSQL store: a process that connects as
//! ipamctl does (the same connection-string handling, over the same client) and runs the
//! one query every command starts with (the schema version), then exits. `bench/run` times
//! it beside the PostgreSQL store's commands: what a command costs above it is ipamctl's.
//!
//!     cargo run --release --example pg_floor -- 'postgresql:///db?host=/run/postgresql'

fn main() {
    let Some(store) = std::env::args().nth(1) else {
        eprintln!("usage: pg_floor URL");
        std::process::exit(2);
    };
    let target = ipamctl::store::pg::Target::new(&store);
    for w in target.iter().flat_map(|t| t.warnings()) {
        eprintln!("warning: {w}");
    }
    let opened = target.and_then(|t| ipamctl::store::pg::PgStore::open(&t));
    if let Err(e) = opened.and_then(|store| store.check_version()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}
