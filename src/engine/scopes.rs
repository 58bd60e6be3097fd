//! Which scopes a command over many pools covers: the one `-n` names, else every scope the
//! caller's [`Scope`] covers (every scope, for the command line run locally). This is where
//! every listing and every release by selectors meets the caller's scope, before any lock:
//! a namespace outside it reads as one that does not exist. A namespace that holds no pool
//! and no allocation does not exist: exit 3, not an empty answer that would hide a typo.

use crate::engine::scope::{Scope, Verb};
use crate::error::{Error, Result};
use crate::model::Namespace;
use crate::store::Store;

/// What a namespace nobody holds anything in is called: also what a caller outside the
/// namespace is told.
pub fn missing(ns: &Namespace) -> String {
    format!("namespace `{ns}` not found: it holds no pool and no allocation")
}

/// `ns` alone if given (exit 3, with the nearest name the caller may see as a hint, when it
/// holds nothing or lies outside the caller's scope), else every scope the caller sees.
/// `verb` is what the caller means to do there (a caller that lacks it is refused).
pub fn scopes(
    store: &dyn Store,
    scope: &Scope,
    verb: Verb,
    ns: Option<Namespace>,
) -> Result<Vec<Option<Namespace>>> {
    if let Some(ns) = &ns {
        scope.check(verb, Some(ns), || missing(ns))?;
    } else if !scope.holds(verb) {
        return Err(Error::Forbidden {
            message: format!("the caller may not {verb}"),
        });
    }
    let all: Vec<Option<Namespace>> = store
        .scopes()?
        .into_iter()
        .filter(|s| scope.sees(s.as_ref()))
        .collect();
    match ns {
        Some(ns) if all.contains(&Some(ns.clone())) => Ok(vec![Some(ns)]),
        Some(ns) => {
            let known: Vec<String> = all.iter().flatten().map(|n| n.to_string()).collect();
            let hint =
                match crate::model::suggest::nearest(ns.as_str(), known.iter().map(String::as_str))
                {
                    Some(near) => format!("did you mean `{near}`?"),
                    None => "`ipamctl pool list` shows the pools of every namespace".into(),
                };
            Err(Error::NotFound {
                message: missing(&ns),
                hint: Some(hint),
            })
        }
        None => Ok(all),
    }
}

/// The scopes of a command that asks the store about every scope at once when not given a
/// namespace: `None` then (only for a caller that sees everything); with `ns`, or for a
/// token's caller, [`scopes`].
pub fn named_scopes(
    store: &dyn Store,
    scope: &Scope,
    verb: Verb,
    ns: Option<Namespace>,
) -> Result<Option<Vec<Option<Namespace>>>> {
    match ns {
        None if scope.is_everything() => Ok(None),
        ns => scopes(store, scope, verb, ns).map(Some),
    }
}
