//! `metrics` through a server: the server's `GET /metrics` for the same flags (`-n`,
//! `--check`), without the server's own request figures, so the exposition is the one the
//! local command prints; written where `--out` says, as locally. `--dhcp-leases` is exit 2:
//! the lease files are on this machine and the allocations on the server.

use std::io::Write;

use super::documents::bad_answer;
use super::transport::{Answer, Client};
use crate::cli::{GlobalArgs, MetricsArgs};
use crate::error::{Error, Result, exit};

/// `metrics`.
pub fn metrics(
    client: &mut Client,
    g: &GlobalArgs,
    args: &MetricsArgs,
    out: &mut dyn Write,
) -> Result<()> {
    crate::cli::cmd::metrics::text_only(g)?;
    if !args.dhcp_leases.is_empty() {
        return Err(Error::Usage {
            message: "`metrics --dhcp-leases` is not available through a server (`--server`): the lease files are read here and the allocations are on the server".into(),
            hint: Some("run it where the state is, with --store URL or -d DIR".into()),
        });
    }
    let ns = crate::engine::request::field::namespace(g.namespace.as_deref())?;
    let mut path = String::from("/metrics?server=false");
    if let Some(ns) = &ns {
        path.push_str(&format!("&namespace={}", encoded(ns.as_str())));
    }
    if args.check {
        path.push_str("&check=true");
    }
    let answer = client.get(&path)?;
    if answer.status != 200 {
        return Err(refused(client.url(), &answer));
    }
    let text = std::str::from_utf8(&answer.body)
        .map_err(|_| bad_answer(client.url(), "metrics that are not UTF-8"))?;
    crate::cli::cmd::metrics::write_exposition(text, args, out)
}

/// `text` percent-encoded for a query string.
fn encoded(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A `/metrics` refusal or failure (one `error:` line, its status saying which) as an
/// error with the command line's exit code for it.
fn refused(url: &str, answer: &Answer) -> Error {
    let (code, exit) = match answer.status {
        400 => ("BAD_REQUEST", exit::INVALID),
        401 => ("UNAUTHENTICATED", exit::DENIED),
        403 => ("FORBIDDEN", exit::DENIED),
        404 => ("NOT_FOUND", exit::NOT_FOUND),
        _ => ("HTTP", exit::FAILURE),
    };
    let body = String::from_utf8_lossy(&answer.body);
    let first = body.lines().next().unwrap_or("").trim();
    let message = match first.strip_prefix("error: ") {
        Some(message) => message.to_owned(),
        None => format!(
            "{url} answered HTTP {} to GET /metrics: {}",
            answer.status,
            crate::yaml::excerpted(first)
        ),
    };
    Error::Answered {
        code: code.into(),
        exit,
        message,
        hint: None,
    }
}
