//! A batch's request (`allocate -f`, `release -f`) as the engine's typed request: the line
//! is read with serde into the request's input ([`AllocateInput::read`],
//! [`ReleaseInput::read`]; the batch's `-n`, `--dry-run` and `--ignore-not-found` give what
//! it leaves out) and made a request by the constructor the single command uses. A line
//! that is not a valid request (bad JSON, an unknown field, a value of the wrong type, a
//! rule of the command broken) is that request's failure, exit 2, and never reaches the
//! store.

use serde_json::Value;

use crate::cli::output;
use crate::engine::executor::{self, Request};
use crate::engine::request::{
    AllocateInput, AllocateRequest, Claimed, Defaults, Freed, ReleaseInput, ReleaseRequest,
};
use crate::engine::scope::Scope;
use crate::error::Result;

/// Which command's requests a batch holds.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    Allocate,
    Release,
}

impl Kind {
    /// The request `line` stands for, the batch's command line giving what it leaves out.
    pub(crate) fn request(self, line: Value, defaults: &Defaults<'_>) -> Result<Request> {
        Ok(match self {
            Kind::Allocate => {
                let input = AllocateInput::read(line, defaults)?;
                Request::Allocate(Box::new(AllocateRequest::new(
                    &input,
                    &Scope::everything(),
                )?))
            }
            Kind::Release => {
                let input = ReleaseInput::read(line, defaults)?;
                Request::Release(Box::new(ReleaseRequest::new(&input, &Scope::everything())?))
            }
        })
    }
}

/// What one request did, as a batch prints it.
pub enum Done {
    /// `allocate`: the addresses (one per pool) or the prefix, and what was done.
    Held(Vec<String>, &'static str, output::Action),
    /// `release`: what was released (nothing: `unchanged`).
    Freed(Vec<String>, &'static str, output::Action),
}

impl From<executor::Done> for Done {
    fn from(done: executor::Done) -> Done {
        match done {
            executor::Done::Claimed(got) => Done::allocated(got),
            executor::Done::Freed(freed, dry_run) => Done::released(freed, dry_run),
        }
    }
}

impl Done {
    fn allocated(got: Claimed) -> Done {
        use crate::cli::output::Action;
        match got {
            Claimed::Addresses(allocated) => {
                let actions: Vec<Action> = allocated.iter().map(super::allocate::action).collect();
                let action = [Action::Created, Action::WouldCreate]
                    .into_iter()
                    .find(|a| actions.contains(a))
                    .unwrap_or(Action::Existing);
                let key = if allocated.len() == 1 {
                    "address"
                } else {
                    "addresses"
                };
                let addresses = allocated
                    .iter()
                    .map(|a| a.manifest().spec.address.to_string())
                    .collect();
                Done::Held(addresses, key, action)
            }
            Claimed::Prefix(m, created) => {
                let action = if created {
                    Action::Created
                } else {
                    Action::Existing
                };
                Done::Held(vec![m.spec.prefix.to_string()], "prefix", action)
            }
            Claimed::WouldPrefix(p) => {
                Done::Held(vec![p.to_string()], "prefix", Action::WouldCreate)
            }
        }
    }

    fn released(freed: Freed, dry_run: bool) -> Done {
        use crate::cli::output::Action;
        let mut what: Vec<String> = freed
            .addresses
            .iter()
            .map(|m| m.spec.address.to_string())
            .collect();
        what.extend(freed.prefixes.iter().map(|m| m.spec.prefix.to_string()));
        let key = match (freed.addresses.len(), freed.prefixes.len()) {
            (1, 0) => "address",
            (0, 1) => "prefix",
            _ => "addresses",
        };
        let action = if what.is_empty() {
            Action::Unchanged
        } else {
            Action::Released.planned(dry_run)
        };
        Done::Freed(what, key, action)
    }
}
