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

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The warnings one use case collected, in the order it met them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Warnings(Vec<Warning>);

impl Warnings {
    /// Adds one.
    pub fn push(&mut self, warning: Warning) {
        self.0.push(warning);
    }

    /// Adds every one of `other`, after those held.
    pub fn extend(&mut self, other: Warnings) {
        self.0.extend(other.0);
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
