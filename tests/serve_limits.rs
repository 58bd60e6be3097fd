//! Hostile input against `ipamctl serve` (issue 42): every limit hit is one clear error and
//! claims nothing; malformed requests are refused; slow clients do not stop a fast one.

mod common;
mod serve_common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::json;
use serve_common::{Server, Store, curl, token};

/// The header that carries the tests' bearer.
fn auth() -> String {
    format!("Authorization: Bearer {}", token())
}

/// How many allocations the store holds in `pool`.
fn held(server: &Server, pool: &str) -> usize {
    let data = server.ok(
        "query($p: String) { allocations(pool: $p) { address } }",
        json!({"p": pool}),
    );
    data["allocations"].as_array().unwrap().len()
}

/// POSTs raw `body` bytes with `headers`: status and body.
fn raw(server: &Server, headers: &[&str], body: &[u8]) -> (u16, String) {
    let auth = auth();
    let mut args = vec!["-H", auth.as_str()];
    for h in headers {
        args.extend(["-H", h]);
    }
    curl(&server.url, "/graphql", &args, body)
}

fn code_of(text: &str) -> String {
    let body: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// `n` aliased `allocate` fields in one document.
fn aliased(n: usize) -> String {
    let fields: String = (0..n)
        .map(|i| format!("a{i}: allocate(input: {{pool: \"public-zone-a\", owner: \"FloatingIP/alias-{i}\"}}) {{ owner }}\n"))
        .collect();
    format!("mutation {{\n{fields}}}")
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn ten_thousand_aliased_allocates_claim_nothing() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &["--max-aliases", "20000", "--max-fields", "50000"]);
    let (status, body) = server.post(&aliased(10_000), json!({}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "LIMIT", "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("10000 claims, more than --max-claims 1000"),
        "{body}"
    );
    assert!(body.get("data").is_none_or(|d| d.is_null()), "{body}");
    assert_eq!(held(&server, "public-zone-a"), 0);
    // allocate aliases and allocateMany inputs count together.
    let server = Server::start(&store, &["--max-claims", "3"]);
    let many = "mutation($i: [AllocateInput!]!) { x: allocate(input: {pool: \"public-zone-a\", owner: \"FloatingIP/x\"}) { owner } allocateMany(inputs: $i) { index } }";
    let three = json!({"i": [{"pool": "public-zone-a", "owner": "FloatingIP/y"}, {"pool": "public-zone-a", "owner": "FloatingIP/z"}, {"pool": "public-zone-a", "owner": "FloatingIP/w"}]});
    let (_, body) = server.post(many, three);
    assert_eq!(body["errors"][0]["extensions"]["code"], "LIMIT", "{body}");
    assert_eq!(held(&server, "public-zone-a"), 0);
    let two = json!({"i": [{"pool": "public-zone-a", "owner": "FloatingIP/y"}, {"pool": "public-zone-a", "owner": "FloatingIP/z"}]});
    server.ok(many, two);
    assert_eq!(held(&server, "public-zone-a"), 3);
    store.assert_check_clean();
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn each_limit_and_each_malformed_request_is_one_clear_refusal() {
    let store = Store::fixture("seed");
    let server = Server::start(
        &store,
        &[
            "--max-body-bytes",
            "4096",
            "--max-depth",
            "5",
            "--max-aliases",
            "3",
        ],
    );
    let json_ct = "Content-Type: application/json";
    // Body over --max-body-bytes: 413, nothing read further, nothing claimed.
    let big = json!({"query": format!("mutation {{ allocate(input: {{pool: \"public-zone-a\", owner: \"FloatingIP/big\"}}) {{ owner }} }} #{}", "x".repeat(8000))}).to_string();
    let (status, text) = raw(&server, &[json_ct], big.as_bytes());
    assert_eq!(status, 413, "{text}");
    assert_eq!(code_of(&text), "LIMIT");
    // Too deep: LIMIT, naming the flag.
    let deep =
        "{ __schema { types { fields { type { ofType { ofType { ofType { name } } } } } } } }";
    let (_, body) = server.post(deep, json!({}));
    assert_eq!(body["errors"][0]["extensions"]["code"], "LIMIT", "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("--max-depth"),
        "{body}"
    );
    // Too many aliases.
    let (_, body) = server.post(
        "{ a: pools { name } b: pools { name } c: pools { name } d: pools { name } }",
        json!({}),
    );
    assert_eq!(body["errors"][0]["extensions"]["code"], "LIMIT", "{body}");
    // A batch (an array body), JSON that is no object, invalid UTF-8, no query.
    let cases: [(&[u8], &str); 5] = [
        (br#"[{"query": "{ pools { name } }"}]"#, "array"),
        (b"\"{ pools { name } }\"", "not a JSON object"),
        (b"{\"query\": \"{ pools { name \xff } }\"}", "not UTF-8"),
        (b"{\"variables\": {}}", "no `query`"),
        (b"{\"query\": ", "not JSON"),
    ];
    for (body, says) in cases {
        let (status, text) = raw(&server, &[json_ct], body);
        assert_eq!(status, 400, "{says}: {text}");
        assert_eq!(code_of(&text), "BAD_REQUEST");
        assert!(text.contains(says), "{says}: {text}");
    }
    // A mutation over GET: 405, nothing claimed.
    let q = "mutation%20%7B%20allocate(input%3A%20%7Bpool%3A%20%22public-zone-a%22%2C%20owner%3A%20%22FloatingIP%2Fget%22%7D)%20%7B%20owner%20%7D%20%7D";
    let (status, text) = curl(
        &server.url,
        &format!("/graphql?query={q}"),
        &["-H", &auth()],
        b"",
    );
    assert_eq!(status, 405, "{text}");
    // A query over GET is served.
    let (status, text) = curl(
        &server.url,
        "/graphql?query=%7B%20pools%20%7B%20name%20%7D%20%7D",
        &["-H", &auth()],
        b"",
    );
    assert_eq!(status, 200, "{text}");
    assert_eq!(held(&server, "public-zone-a"), 0);
    // Nothing panicked: the server still serves, and said nothing of a panic.
    assert_eq!(curl(&server.url, "/healthz", &[], b"").0, 200);
    assert!(!server.log().contains("panicked"), "{}", server.log());
    assert!(!server.log().contains(token()));
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn slow_clients_do_not_stop_a_fast_one_and_are_cut_at_the_read_timeout() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &["--read-timeout", "2s"]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    // 500 connections that send half a request line and then nothing.
    let mut slow = Vec::new();
    for _ in 0..500 {
        let mut s = TcpStream::connect(&addr).expect("connect");
        s.write_all(b"POST /graphql HTTP/1.1\r\nHost: x\r\n")
            .unwrap();
        slow.push(s);
    }
    let started = Instant::now();
    let data = server.ok("{ pools { name } }", json!({}));
    assert_eq!(data["pools"][0]["name"], "public-zone-a");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a fast client waited {:?}",
        started.elapsed()
    );
    // The slow ones are closed once --read-timeout passes (bounded wait).
    let mut first = slow.swap_remove(0);
    first
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut buf = Vec::new();
    let cut = Instant::now();
    let _ = first.read_to_end(&mut buf);
    assert!(
        cut.elapsed() < Duration::from_secs(8),
        "still open after {:?}",
        cut.elapsed()
    );
    // A body that never comes is cut alike: 408.
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(s, "POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{", token = token()).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn requests_in_flight_and_run_time_are_bounded() {
    let store = Store::fixture("seed");
    let server = Server::start(&store, &["--max-in-flight", "1", "--read-timeout", "2s"]);
    let addr = server.url.trim_start_matches("http://").to_owned();
    // One request whose body comes slowly holds the only slot...
    let mut slow = TcpStream::connect(&addr).unwrap();
    write!(slow, "POST /graphql HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{", token = token()).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // ...so another is refused at once: 503, LIMIT.
    let (status, text) = raw(
        &server,
        &["Content-Type: application/json"],
        br#"{"query": "{ pools { name } }"}"#,
    );
    assert_eq!(status, 503, "{text}");
    assert_eq!(code_of(&text), "LIMIT");
    assert!(text.contains("--max-in-flight 1"), "{text}");
    // Once the slow one is cut (408), the slot is free again.
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = String::new();
    let _ = slow.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    server.ok("{ pools { name } }", json!({}));

    // A request that runs longer than --request-timeout: LIMIT, and asking again (with
    // time enough) answers what the first one may have claimed.
    let server = Server::start(&store, &["--request-timeout", "1ms"]);
    let inputs: Vec<_> = (0..100)
        .map(|i| json!({"pool": "public-zone-a", "owner": format!("FloatingIP/slow-{i}")}))
        .collect();
    let many = "mutation($i: [AllocateInput!]!) { allocateMany(inputs: $i) { claim { addresses } error { code } } }";
    let (status, body) = server.post(many, json!({"i": inputs}));
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["errors"][0]["extensions"]["code"], "LIMIT", "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("--request-timeout 1ms"),
        "{body}"
    );
    let server = Server::start(&store, &[]);
    let data = server.ok(many, json!({"i": inputs}));
    let outcomes = data["allocateMany"].as_array().unwrap();
    assert!(outcomes.iter().all(|o| o["error"].is_null()), "{data}");
    store.assert_check_clean();
}

#[test]
#[cfg_attr(not(has_curl), ignore = "needs curl: apt-get install curl")]
fn cors_headers_only_for_the_origins_named() {
    let store = Store::fixture("seed");
    let preflight = |server: &Server, origin: &str| {
        let out = std::process::Command::new("curl")
            .args([
                "-sS",
                "--max-time",
                "20",
                "-o",
                "/dev/null",
                "-D",
                "-",
                "-X",
                "OPTIONS",
            ])
            .args([
                "-H",
                &format!("Origin: {origin}"),
                "-H",
                "Access-Control-Request-Method: POST",
            ])
            .arg(format!("{}/graphql", server.url))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_lowercase()
    };
    let server = Server::start(&store, &[]);
    assert!(
        !preflight(&server, "https://director.example").contains("access-control-allow-origin")
    );
    let server = Server::start(&store, &["--cors-origin", "https://director.example"]);
    let allowed = preflight(&server, "https://director.example");
    assert!(
        allowed.contains("access-control-allow-origin: https://director.example"),
        "{allowed}"
    );
    assert!(
        !preflight(&server, "https://evil.example")
            .contains("access-control-allow-origin: https://evil.example")
    );
}
