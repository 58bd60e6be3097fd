//! Warnings: what a use case noticed and did not stop for (a file that does not parse, a
//! record that holds nothing back). The engine returns them as values; the command that
//! called it prints each as one `warning:` line on stderr.

use std::fmt;

/// One warning, as the line after `warning: ` reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning(String);

impl Warning {
    /// A warning saying `message` (lowercase, naming the file or value it is about).
    pub fn new(message: impl Into<String>) -> Warning {
        Warning(message.into())
    }
}

/// `why` a file was not used, then in parentheses what was done about it (`done`) and that
/// `ipamctl check` says more, each left out when `why` says it already (a merge conflict's
/// message says that the address stays taken and that `check` says how to resolve it).
pub fn unparsable(path: &str, why: &str, done: &str) -> Warning {
    let mut notes = Vec::new();
    if !why.contains("stays taken") || !done.contains("stays taken") {
        notes.push(done);
    }
    if !why.contains("`ipamctl check`") {
        notes.push("run `ipamctl check`");
    }
    Warning::new(if notes.is_empty() {
        format!("{path}: {why}")
    } else {
        format!("{path}: {why} ({})", notes.join("; "))
    })
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The warnings one use case collected, in the order it met them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Warnings(Vec<Warning>);

impl Warnings {
    /// Adds one, unless it is held already: a use case that reads a file twice (a look-up,
    /// then the same look-up under the lock) warns about it once.
    pub fn push(&mut self, warning: Warning) {
        if !self.0.contains(&warning) {
            self.0.push(warning);
        }
    }

    /// Adds every one of `other` not held already, after those held.
    pub fn extend(&mut self, other: Warnings) {
        for w in other.0 {
            self.push(w);
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops those about `path` (a file an error is about to name itself).
    pub fn forget_about(&mut self, path: &str) {
        self.0.retain(|w| !w.0.starts_with(path));
    }

    /// Each, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Warning> {
        self.0.iter()
    }
}
