//! Who is calling: [`Authenticator::caller`] turns a request's `Authorization` header into
//! a [`Caller`] (a token's name and its [`Scope`]), or [`Error::Unauthenticated`]. It is the
//! one seam between the server and the tokens: every request passes here before it reaches
//! the schema, and nothing else in the server reads the header.
//!
//! Until the tokens file lands (`ipamctl token create`, issue 42), the only bearer known is
//! the one `IPAMCTL_SERVE_TEST_TOKEN` holds when the server starts (for the tests), whose
//! caller is `test` with the whole scope; with it unset every bearer is refused. The tokens
//! work replaces [`Authenticator::load`] and the body of [`Authenticator::caller`]; their
//! signatures are what the rest of the server relies on.

use std::path::Path;

use crate::engine::scope::Scope;
use crate::error::{Error, Result};

/// The environment variable that holds the one bearer known before tokens exist.
const TEST_TOKEN: &str = "IPAMCTL_SERVE_TEST_TOKEN";

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
    test_secret: Option<String>,
}

impl Authenticator {
    /// The bearers known to a server started with `--tokens FILE` (`tokens`).
    pub fn load(tokens: Option<&Path>) -> Result<Authenticator> {
        if let Some(file) = tokens {
            super::log::warning(&format!(
                "{}: tokens files are not read yet; every bearer is refused but the one {TEST_TOKEN} holds",
                file.display()
            ));
        }
        Ok(Authenticator {
            test_secret: std::env::var(TEST_TOKEN).ok().filter(|s| !s.is_empty()),
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
        match &self.test_secret {
            Some(known) if constant_time_eq(known.as_bytes(), secret) => Ok(Caller {
                name: "test".into(),
                scope: Scope::everything(),
            }),
            _ => Err(unauthenticated(
                "the bearer token is not known (or was revoked)",
            )),
        }
    }
}

fn unauthenticated(message: &str) -> Error {
    Error::Unauthenticated {
        message: message.into(),
    }
}

/// Whether `a` and `b` are equal, in a time that depends on their lengths only.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_malformed_or_unknown_bearer_is_unauthenticated() {
        let auth = Authenticator {
            test_secret: Some("s3cret".into()),
        };
        for header in [
            None,
            Some(&b"Basic abc"[..]),
            Some(b"Bearer nope"),
            Some(b"Bearer s3cre"),
        ] {
            assert!(matches!(
                auth.caller(header),
                Err(Error::Unauthenticated { .. })
            ));
        }
        assert_eq!(auth.caller(Some(b"Bearer s3cret")).unwrap().name, "test");
        let none = Authenticator { test_secret: None };
        assert!(none.caller(Some(b"Bearer ")).is_err());
    }
}
