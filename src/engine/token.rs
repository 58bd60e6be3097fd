//! Tokens: made, listed and revoked by the command line only (`ipamctl token`), each a
//! 256-bit random secret shown once and kept as its SHA-256 in the tokens file
//! ([`crate::store::tokens`]); and [`TokenBook`], what a server asks who a presented secret
//! belongs to ([`TokenBook::authenticate`]: a [`Caller`], the token's name and [`Scope`]).
//! The book notices a new token or a revocation within two seconds without a restart.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use ring::rand::SecureRandom;

use crate::engine::scope::{Pattern, Scope, Verb};
use crate::error::{Error, Result};
use crate::model::Timestamp;
use crate::model::token::{
    SECRET_BYTES, Secret, TokenFile, TokenHash, TokenName, TokenRecord, well_formed,
};
use crate::store::tokens::{self, Stamp};

/// Who a request comes from: the token's name (for logs) and its scope (for the engine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Caller {
    pub name: TokenName,
    pub scope: Scope,
}

/// What `token create` asks for, as text from the command line.
#[derive(Clone, Debug, Default)]
pub struct NewToken {
    pub name: String,
    /// Namespace patterns: `acme/prod`, `acme/*`, `*`.
    pub namespaces: Vec<String>,
    /// Verbs: `read`, `claim`, `admin`.
    pub verbs: Vec<String>,
    pub cluster: bool,
}

/// A token's scope as its record states it; exit 2 naming what is wrong.
pub fn scope_of(record: &TokenRecord) -> Result<Scope> {
    let patterns = record
        .namespaces
        .iter()
        .map(|p| Pattern::parse(p))
        .collect::<Result<Vec<_>>>()?;
    let mut verbs = record
        .verbs
        .iter()
        .map(|v| Verb::parse(v))
        .collect::<Result<Vec<_>>>()?;
    verbs.sort();
    verbs.dedup();
    Ok(Scope::token(patterns, verbs, record.cluster))
}

/// Makes a token: validates the request (exit 2), adds its record to the file at `path`
/// under the file's lock (a name already there is exit 4) and returns the record and the
/// secret, which exists nowhere else: the caller shows it once.
pub fn create(path: &Path, new: &NewToken) -> Result<(TokenRecord, Secret)> {
    let name = TokenName::new(&new.name).map_err(Error::usage)?;
    if new.verbs.is_empty() {
        return Err(Error::usage(
            "a token needs at least one verb: --verbs read,claim,admin",
        ));
    }
    if new.namespaces.is_empty() && !new.cluster {
        return Err(Error::usage(
            "a token needs a scope: --namespace PATTERN (repeatable), --cluster, or both",
        ));
    }
    let mut bytes = [0u8; SECRET_BYTES];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Error::io(path, std::io::Error::other("no system random source")))?;
    let secret = Secret::from_bytes(&bytes);
    let record = TokenRecord {
        name,
        namespaces: new.namespaces.clone(),
        verbs: new.verbs.clone(),
        cluster: new.cluster,
        created: Timestamp::now(),
        hash: secret.hash(),
    };
    // The scope parses as the book will parse it: a bad pattern or verb is refused here.
    let scope = scope_of(&record)?;
    let record = TokenRecord {
        namespaces: scope
            .patterns()
            .unwrap_or_default()
            .iter()
            .map(ToString::to_string)
            .fold(Vec::new(), |mut kept, p| {
                if !kept.contains(&p) {
                    kept.push(p);
                }
                kept
            }),
        verbs: Verb::ALL
            .into_iter()
            .filter(|v| scope.holds(*v))
            .map(|v| v.name().to_owned())
            .collect(),
        ..record
    };
    tokens::update(path, |file| {
        if file.tokens.iter().any(|t| t.name == record.name) {
            return Err(Error::Conflict {
                message: format!("token `{}` exists in {}", record.name, path.display()),
                hint: Some(format!(
                    "revoke it first (ipamctl token revoke {} --tokens {}) or choose another name",
                    record.name,
                    path.display()
                )),
            });
        }
        file.tokens.push(record.clone());
        Ok(())
    })?;
    Ok((record, secret))
}

/// The tokens of the file at `path`, by name (their hashes too; a front end shows neither
/// those nor, having none, a secret). No file is exit 3.
pub fn list(path: &Path) -> Result<Vec<TokenRecord>> {
    match tokens::load(path)? {
        Some((file, _)) => Ok(file.tokens),
        None => Err(no_file(path)),
    }
}

/// Revokes the token `name`: its record leaves the file, so its secret authenticates
/// nothing more (a running server notices within two seconds). An unknown name is exit 3.
pub fn revoke(path: &Path, name: &str) -> Result<TokenRecord> {
    let name = TokenName::new(name).map_err(Error::usage)?;
    if tokens::stamp(path)?.is_none() {
        return Err(no_file(path));
    }
    tokens::update(path, |file| {
        let at = file
            .tokens
            .iter()
            .position(|t| t.name == name)
            .ok_or_else(|| Error::NotFound {
                message: format!("no token `{name}` in {}", path.display()),
                hint: Some(format!("ipamctl token list --tokens {}", path.display())),
            })?;
        Ok(file.tokens.remove(at))
    })
}

fn no_file(path: &Path) -> Error {
    Error::NotFound {
        message: format!("{}: no tokens file", path.display()),
        hint: Some(format!(
            "make it with its first token: ipamctl token create tenant-a --tokens {} --namespace tenant-a --verbs read",
            path.display()
        )),
    }
}

/// How often the book looks at the file at most.
const RECHECK: Duration = Duration::from_secs(1);
/// How long a tokens file may stay missing or unreadable as one (a replacement by hand
/// under way) before the book stops accepting the last good copy's tokens.
const GRACE: Duration = Duration::from_secs(2);
/// A file changed less than this before it was read may change again with the same stamp
/// (a file system's clock ticks coarsely): it is read again at the next look.
const RACY: Duration = Duration::from_secs(2);

/// The tokens a server accepts, read from the tokens file and read again when it changes.
///
/// [`TokenBook::authenticate`] looks at the file's stamp (device, inode, size, change and
/// modification times, mode) at most once a second and reads it again when the stamp
/// differs, so a new token or a revocation counts within two seconds. A file that cannot be
/// read as a tokens file (half-written by hand, removed and not yet put back) leaves the last
/// good copy in use for [`GRACE`], then authenticates nobody (it fails closed: a file
/// removed to revoke everything does); a file that became readable by others, or a symlink
/// put in its place, authenticates nobody at once. Either is fixed by a good file.
#[derive(Debug)]
pub struct TokenBook {
    path: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    checked: Instant,
    /// The stamp of what `tokens` was read from; `None` to read again at the next look.
    stamp: Option<Stamp>,
    tokens: Vec<(TokenRecord, Scope)>,
    /// Why no token is accepted now (the file's mode), if so.
    refused: Option<String>,
    /// Since when the file has been missing or no tokens file, if it is.
    broken: Option<Instant>,
}

impl TokenBook {
    /// Opens the book of the file at `path`: exit 3 when there is none, exit 2 when it is
    /// readable by others, a symlink, or no tokens file (a server refuses to start).
    pub fn open(path: impl Into<PathBuf>) -> Result<TokenBook> {
        let path = path.into();
        let (file, stamp) = tokens::load(&path)?.ok_or_else(|| no_file(&path))?;
        let tokens = scoped(&path, &file)?;
        Ok(TokenBook {
            state: Mutex::new(State {
                checked: Instant::now(),
                stamp: trusted(stamp),
                tokens,
                refused: None,
                broken: None,
            }),
            path,
        })
    }

    /// The file the book reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who `secret` belongs to: its token's name and scope. A secret of no token (wrong,
    /// revoked, malformed, empty) is [`Error::Unauthenticated`], the same for each.
    pub fn authenticate(&self, secret: &str) -> Result<Caller> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.checked.elapsed() >= RECHECK {
            self.refresh(&mut state);
        }
        if let Some(why) = &state.refused {
            return Err(Error::Unauthenticated {
                message: format!("no token is accepted: {why}"),
            });
        }
        let refused = || Error::Unauthenticated {
            message: "the token is not valid: unknown, revoked or malformed".into(),
        };
        if !well_formed(secret) {
            return Err(refused());
        }
        // Every record is compared, in constant time each, with no early exit.
        let hash = TokenHash::of(secret);
        let mut found = None;
        for (record, scope) in &state.tokens {
            if record.hash.matches(&hash) {
                found = Some(Caller {
                    name: record.name.clone(),
                    scope: scope.clone(),
                });
            }
        }
        found.ok_or_else(refused)
    }

    /// Looks at the file and reads it again if it changed.
    fn refresh(&self, state: &mut State) {
        state.checked = Instant::now();
        let now = match tokens::stamp(&self.path) {
            Ok(now) => now,
            // Cannot look (the directory went away): keep what we have.
            Err(_) => return,
        };
        if now.is_some() && now == state.stamp {
            return;
        }
        let read = tokens::load(&self.path)
            .and_then(|file| file.ok_or_else(|| no_file(&self.path)))
            .and_then(|(file, stamp)| Ok((scoped(&self.path, &file)?, stamp)));
        match read {
            Ok((tokens, stamp)) => {
                state.tokens = tokens;
                state.stamp = trusted(stamp);
                state.refused = None;
                state.broken = None;
            }
            // Gone (being replaced by hand) or half-written: the last good copy, for a while.
            Err(e @ (Error::NotFound { .. } | Error::Invalid { .. } | Error::Io { .. })) => {
                state.stamp = None;
                let since = *state.broken.get_or_insert_with(Instant::now);
                if since.elapsed() >= GRACE {
                    state.refused = Some(e.to_string());
                }
            }
            // Readable by others, a symlink, not a file: accept nothing until it is fixed.
            Err(e) => {
                state.refused = Some(e.to_string());
                state.stamp = None;
            }
        }
    }
}

/// Each record with its scope; a record that does not parse makes the file invalid.
fn scoped(path: &Path, file: &TokenFile) -> Result<Vec<(TokenRecord, Scope)>> {
    file.tokens
        .iter()
        .map(|r| {
            scope_of(r).map(|s| (r.clone(), s)).map_err(|e| {
                Error::invalid(
                    path.display().to_string(),
                    format!("token `{}`: {e}", r.name),
                )
            })
        })
        .collect()
}

/// `stamp`, unless the file changed so recently that a change to come could leave it
/// unchanged (git's "racily clean"): then `None`, to read the file again at the next look.
fn trusted(stamp: Stamp) -> Option<Stamp> {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    (now - stamp.changed_secs() > RACY.as_secs() as i64).then_some(stamp)
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
