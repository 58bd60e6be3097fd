//! Counts the round trips one ipamctl command makes to PostgreSQL, at the protocol: a proxy
//! on a loopback port in front of the server's unix socket counts every `Query` (simple
//! protocol) and every `Sync` (the end of an extended-protocol statement), each of which
//! waits for the server's answer, and prints the count once the command has exited.
//! `bench/run` shows it beside the times.
//!
//!     cargo run --release --example pg_round_trips -- URL -- ipamctl --store {STORE} pool list
//!
//! `{STORE}` in the command is replaced by the proxy's connection string (the same
//! database and user, `sslmode=disable`: the proxy reads the protocol in the clear).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Reads one length-prefixed message (`typed`: with its type byte first).
fn message(from: &mut TcpStream, typed: bool) -> Option<Vec<u8>> {
    let head_len = if typed { 5 } else { 4 };
    let mut head = vec![0u8; head_len];
    from.read_exact(&mut head).ok()?;
    let len = u32::from_be_bytes(head[head_len - 4..].try_into().ok()?) as usize;
    let mut body = vec![0u8; len.saturating_sub(4)];
    from.read_exact(&mut body).ok()?;
    head.extend_from_slice(&body);
    Some(head)
}

/// Passes one client connection on to the server, counting its round trips.
fn pump(mut client: TcpStream, server: UnixStream, trips: &AtomicUsize) {
    let (mut from_server, mut to_client) = match (server.try_clone(), client.try_clone()) {
        (Ok(s), Ok(c)) => (s, c),
        _ => return,
    };
    let back = std::thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(std::net::Shutdown::Both);
    });
    let mut to_server = server;
    let mut typed = false;
    while let Some(m) = message(&mut client, typed) {
        if typed && matches!(m[0], b'Q' | b'S') {
            trips.fetch_add(1, Ordering::SeqCst);
        }
        typed = true;
        if to_server.write_all(&m).is_err() {
            break;
        }
    }
    let _ = to_server.shutdown(std::net::Shutdown::Both);
    let _ = back.join();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(split) = args.iter().position(|a| a == "--") else {
        eprintln!("usage: pg_round_trips URL -- COMMAND ARGS… ({{STORE}} in ARGS is the proxy)");
        std::process::exit(2);
    };
    let info = ipamctl::store::pg::conninfo::ConnInfo::parse(&args[0])
        .unwrap_or_else(|e| {
            eprintln!("pg_round_trips: {e}");
            std::process::exit(2);
        })
        .with_defaults("postgres");
    let socket = format!(
        "{}/.s.PGSQL.{}",
        info.get("host").unwrap_or("/tmp"),
        info.get("port").unwrap_or("5432")
    );
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let port = listener.local_addr().expect("its address").port();
    let store = format!(
        "postgresql://{}@127.0.0.1:{port}/{}?sslmode=disable",
        info.get("user").unwrap_or("postgres"),
        info.get("dbname").unwrap_or("postgres")
    );
    let trips = Arc::new(AtomicUsize::new(0));
    let counted = trips.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = UnixStream::connect(&socket) else {
                continue;
            };
            let counted = counted.clone();
            std::thread::spawn(move || pump(client, server, &counted));
        }
    });
    let command: Vec<String> = args[split + 1..]
        .iter()
        .map(|a| a.replace("{STORE}", &store))
        .collect();
    let Some((program, rest)) = command.split_first() else {
        eprintln!("pg_round_trips: no command given");
        std::process::exit(2);
    };
    let status = std::process::Command::new(program)
        .args(rest)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap_or_else(|e| {
            eprintln!("pg_round_trips: {program}: {e}");
            std::process::exit(2);
        });
    // The client's last messages (COMMIT's answer) are read before it exits.
    println!("{}", trips.load(Ordering::SeqCst));
    std::process::exit(status.code().unwrap_or(1));
}
