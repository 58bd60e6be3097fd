//! Bearer tokens as values: a token's name, the record the tokens file keeps of it (its
//! scope as text and the SHA-256 of its secret, never the secret), the secret's text form
//! and the constant-time comparison of a presented secret with a kept hash. Pure: the
//! random bytes come from the caller, the file from the store.

use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::model::Timestamp;

/// What every secret starts with, so a leaked one is recognisable (by secret scanners too).
pub const SECRET_PREFIX: &str = "ipamctl_";
/// The bytes of randomness in a secret: 256 bits.
pub const SECRET_BYTES: usize = 32;
/// What a kept hash starts with, naming its algorithm.
const HASH_PREFIX: &str = "sha256:";

/// The `kind` of a tokens file.
pub const TOKENS_KIND: &str = "TokenList";

/// A token's name: an RFC 1123 label (`ci`, `tenant-acme`), unique in its file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TokenName(String);

impl TokenName {
    /// Validates `s`; the error says why it is no token name.
    pub fn new(s: &str) -> Result<TokenName, String> {
        crate::model::names::check_label(s)
            .map(|()| TokenName(s.to_owned()))
            .map_err(|why| format!("token name `{}` {why}", s.escape_debug()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TokenName {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        TokenName::new(&s)
    }
}

impl From<TokenName> for String {
    fn from(name: TokenName) -> String {
        name.0
    }
}

impl fmt::Display for TokenName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A bearer secret in its text form: [`SECRET_PREFIX`] and 64 lowercase hex digits. Its
/// `Debug` hides it, so no `{:?}` of a value that holds one logs it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret made of `bytes` (from a cryptographic random source).
    pub fn from_bytes(bytes: &[u8; SECRET_BYTES]) -> Secret {
        Secret(format!("{SECRET_PREFIX}{}", hex(bytes)))
    }

    /// The text to give the caller, once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The hash the tokens file keeps of this secret.
    pub fn hash(&self) -> TokenHash {
        TokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Whether `presented` has the form of a secret: a wrong form is refused before any hash
/// is computed (and says nothing of which tokens exist).
pub fn well_formed(presented: &str) -> bool {
    presented.strip_prefix(SECRET_PREFIX).is_some_and(|digits| {
        digits.len() == 2 * SECRET_BYTES
            && digits
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The SHA-256 of a secret, written `sha256:<64 hex digits>`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TokenHash([u8; 32]);

impl TokenHash {
    /// The hash of `presented` (any text: a hash of a wrong secret matches nothing).
    pub fn of(presented: &str) -> TokenHash {
        TokenHash(Sha256::digest(presented.as_bytes()).into())
    }

    /// Whether the two are equal, in time that does not depend on where they differ.
    pub fn matches(&self, other: &TokenHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl TryFrom<String> for TokenHash {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        let bad = || {
            format!(
                "hash `{}` is not `sha256:` and 64 hex digits",
                s.escape_debug()
            )
        };
        let digits = s.strip_prefix(HASH_PREFIX).ok_or_else(bad)?;
        if digits.len() != 64 {
            return Err(bad());
        }
        let mut bytes = [0u8; 32];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(digits.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                .map_err(|_| bad())?;
        }
        Ok(TokenHash(bytes))
    }
}

impl From<TokenHash> for String {
    fn from(hash: TokenHash) -> String {
        format!("{HASH_PREFIX}{}", hex(&hash.0))
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// What the tokens file keeps of one token: its name, scope as text (namespace patterns,
/// verbs, the cluster scope) and the hash of its secret. The engine parses the scope
/// (`crate::engine::token`); the secret itself is never kept.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRecord {
    pub name: TokenName,
    /// Namespace patterns: `acme/prod`, `acme/*` or `*`.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// `read`, `claim`, `admin`.
    pub verbs: Vec<String>,
    /// Whether the token holds the cluster scope too.
    #[serde(default)]
    pub cluster: bool,
    /// When it was made (`creationTimestamp`, as a manifest's metadata names it).
    #[serde(rename = "creationTimestamp")]
    pub created: Timestamp,
    pub hash: TokenHash,
}

/// The tokens file: a `TokenList` of records, sorted by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenFile {
    pub api_version: String,
    pub kind: String,
    #[serde(default)]
    pub tokens: Vec<TokenRecord>,
}

impl Default for TokenFile {
    fn default() -> TokenFile {
        TokenFile {
            api_version: crate::model::API_VERSION.into(),
            kind: TOKENS_KIND.into(),
            tokens: Vec::new(),
        }
    }
}

impl TokenFile {
    /// Checks what serde cannot: the envelope, and one record per name.
    pub fn validate(&self) -> Result<(), String> {
        if self.api_version != crate::model::API_VERSION {
            return Err(format!(
                "apiVersion: `{}` is not supported; expected `{}`",
                self.api_version,
                crate::model::API_VERSION
            ));
        }
        if self.kind != TOKENS_KIND {
            return Err(format!("kind: `{}`; expected `{TOKENS_KIND}`", self.kind));
        }
        let mut names: Vec<&TokenName> = self.tokens.iter().map(|t| &t.name).collect();
        names.sort();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("token `{}` is listed twice", w[0]));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str, secret: &Secret) -> TokenRecord {
        TokenRecord {
            name: TokenName::new(name).unwrap(),
            namespaces: vec!["acme/*".into()],
            verbs: vec!["read".into()],
            cluster: false,
            created: Timestamp::from_secs(1_800_000_000),
            hash: secret.hash(),
        }
    }

    #[test]
    fn a_secret_is_found_by_its_hash_and_nothing_else_is() {
        let a = Secret::from_bytes(&[7; SECRET_BYTES]);
        let b = Secret::from_bytes(&[8; SECRET_BYTES]);
        assert!(well_formed(a.expose()));
        assert_eq!(a.expose().len(), SECRET_PREFIX.len() + 64);
        let file = TokenFile {
            tokens: vec![record("a", &a)],
            ..TokenFile::default()
        };
        assert!(file.tokens[0].hash.matches(&TokenHash::of(a.expose())));
        assert!(!file.tokens[0].hash.matches(&TokenHash::of(b.expose())));
        // Malformed: wrong prefix, upper case, short, the hash itself.
        let upper = a.expose().to_uppercase();
        let hash = String::from(a.hash());
        for bad in ["", "ipamctl_", &upper, &a.expose()[..20], &hash] {
            assert!(!well_formed(bad), "{bad}");
        }
        assert_eq!(format!("{a:?}"), "Secret(…)");
    }

    #[test]
    fn a_hash_round_trips_and_a_bad_one_is_refused() {
        let hash = Secret::from_bytes(&[0xab; SECRET_BYTES]).hash();
        let text = String::from(hash.clone());
        assert!(text.starts_with("sha256:") && text.len() == 7 + 64);
        assert_eq!(TokenHash::try_from(text).unwrap(), hash);
        for bad in ["sha256:zz", "md5:00", "sha256:é0"] {
            assert!(TokenHash::try_from(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_file_with_one_name_twice_is_invalid() {
        let s = Secret::from_bytes(&[1; SECRET_BYTES]);
        let file = TokenFile {
            tokens: vec![record("a", &s), record("a", &s)],
            ..TokenFile::default()
        };
        assert!(file.validate().unwrap_err().contains("twice"));
        assert!(TokenName::new("Bad_Name").is_err());
    }
}
