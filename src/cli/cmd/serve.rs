//! `ipamctl serve`: parses the flags into the server's configuration and runs it
//! ([`crate::serve::run`]); everything else is the server's.

use std::io::Write;
use std::net::{SocketAddr, ToSocketAddrs};

use crate::cli::GlobalArgs;
use crate::cli::serve_args::{LogFormatArg, ServeArgs};
use crate::error::{Error, Result};
use crate::serve::{Config, Limits, LogFormat};

pub fn run(g: &GlobalArgs, args: &ServeArgs, out: &mut dyn Write) -> Result<()> {
    use crate::cli::OutputFormat;
    if let Some(f @ (OutputFormat::Json | OutputFormat::Yaml | OutputFormat::Name)) = g.output {
        return Err(Error::Usage {
            message: format!(
                "`serve` has no `-o {}` form: it answers GraphQL, and `--print-schema` prints SDL",
                clap::ValueEnum::to_possible_value(&f)
                    .map_or_else(String::new, |v| v.get_name().to_owned())
            ),
            hint: Some("drop `-o`: ipamctl serve --print-schema > schema.graphql".into()),
        });
    }
    if args.print_schema {
        return crate::cli::output::write(out, &crate::serve::sdl());
    }
    let config = Config {
        location: super::location(g)?,
        listen: listen(&args.listen)?,
        tls: args.tls_cert.clone().zip(args.tls_key.clone()),
        insecure: args.insecure,
        tokens: args.tokens.clone(),
        shutdown_timeout: args.shutdown_timeout,
        reap: args.reap_interval.map(|every| (every, args.reap_grace)),
        log_format: match args.log_format {
            LogFormatArg::Text => LogFormat::Text,
            LogFormatArg::Json => LogFormat::Json,
        },
        cors_origins: args.cors_origin.clone(),
        workers: args.workers.into(),
        limits: Limits {
            body_bytes: args.max_body_bytes,
            depth: args.max_depth,
            complexity: args.max_complexity,
            fields: args.max_fields,
            aliases: args.max_aliases,
            claims: args.max_claims,
            read_timeout: args.read_timeout,
            in_flight: args.max_in_flight.max(1),
            request_time: args.request_timeout,
        },
    };
    crate::serve::run(config)
}

/// `--listen` values as socket addresses (a host name resolves to its first address).
fn listen(given: &[String]) -> Result<Vec<SocketAddr>> {
    given
        .iter()
        .map(|l| {
            let bad = |why: String| Error::invalid("--listen", why);
            l.to_socket_addrs()
                .map_err(|e| bad(format!("`{l}` is not HOST:PORT: {e}")))?
                .next()
                .ok_or_else(|| bad(format!("`{l}` names no address")))
        })
        .collect()
}
