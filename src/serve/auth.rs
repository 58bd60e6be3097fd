//! Who is calling: [`Authenticator::caller`] turns a request's `Authorization` header into
//! a [`Caller`] (a token's name and its [`Scope`]), or [`Error::Unauthenticated`]. It is the
//! one seam between the server and the tokens: every request passes here before it reaches
//! the schema, and nothing else in the server reads the header.
//!
//! The bearers are the tokens file's (`--tokens FILE`, made by `ipamctl token create`),
//! read through the engine's [`TokenBook`]: each secret kept as its SHA-256 and compared in
//! constant time, a new token or a revocation noticed within two seconds without a restart,
//! and a file others may read refused at start and, if it becomes so, every token refused.

use std::path::Path;

use crate::engine::scope::Scope;
use crate::engine::token::TokenBook;
use crate::error::{Error, Result};

/// A caller the server knows.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The token's name, as the request log shows it (never its secret).
    pub name: String,
    /// What the token may do where.
    pub scope: Scope,
}

/// What the server checks bearers against.
pub struct Authenticator {
    book: TokenBook,
}

impl Authenticator {
    /// The bearers of the tokens file `tokens`: exit 2 without one (a server with no
    /// tokens would serve nobody, or everybody), or for a file others may read.
    pub fn load(tokens: Option<&Path>) -> Result<Authenticator> {
        let Some(file) = tokens else {
            return Err(Error::Usage {
                message: "`ipamctl serve` needs `--tokens FILE`: the bearers it knows".into(),
                hint: Some(
                    "make one: `ipamctl token create director --tokens FILE --namespace 'acme/*' --verbs read,claim,admin`"
                        .into(),
                ),
            });
        };
        Ok(Authenticator {
            book: TokenBook::open(file)?,
        })
    }

    /// The caller whose bearer `authorization` (the header's value, if any) carries;
    /// [`Error::Unauthenticated`] for none, a malformed one or one not known.
    pub fn caller(&self, authorization: Option<&[u8]>) -> Result<Caller> {
        let Some(header) = authorization else {
            return Err(unauthenticated(
                "no bearer token: send `Authorization: Bearer TOKEN`",
            ));
        };
        let secret = header
            .strip_prefix(b"Bearer ")
            .or_else(|| header.strip_prefix(b"bearer "))
            .ok_or_else(|| unauthenticated("the `Authorization` header is not `Bearer TOKEN`"))?;
        let secret = std::str::from_utf8(secret).map_err(|_| {
            unauthenticated("the token is not valid: unknown, revoked or malformed")
        })?;
        let caller = self.book.authenticate(secret.trim())?;
        Ok(Caller {
            name: caller.name.to_string(),
            scope: caller.scope,
        })
    }
}

fn unauthenticated(message: &str) -> Error {
    Error::Unauthenticated {
        message: message.into(),
    }
}
