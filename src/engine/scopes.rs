//! Which scopes a command over many pools covers: the one `-n` names, else every scope. A
//! namespace that holds no pool and no allocation does not exist: exit 3, not an empty
//! answer that would hide a typo.

use crate::error::{Error, Result};
use crate::model::Namespace;
use crate::store::Store;

/// `ns` alone if given (exit 3, with the nearest name as a hint, when it holds nothing),
/// else every scope.
pub fn scopes(store: &dyn Store, ns: Option<Namespace>) -> Result<Vec<Option<Namespace>>> {
    let all = store.scopes()?;
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
                message: format!("namespace `{ns}` not found: it holds no pool and no allocation"),
                hint: Some(hint),
            })
        }
        None => Ok(all),
    }
}

/// The scopes of a command that asks the store about every scope at once when not given a
/// namespace: `None` then; with `ns`, [`scopes`] (exit 3 if it holds nothing).
pub fn named_scopes(
    store: &dyn Store,
    ns: Option<Namespace>,
) -> Result<Option<Vec<Option<Namespace>>>> {
    match ns {
        Some(ns) => scopes(store, Some(ns)).map(Some),
        None => Ok(None),
    }
}
