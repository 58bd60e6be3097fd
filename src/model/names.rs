//! The validated names: pools, subnets, namespaces and uids, each an RFC 1123 label (or
//! labels) checked once where it enters.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Checks `s` is a lowercase RFC 1123 label: 1–63 of `[a-z0-9-]`, alphanumeric at both ends.
pub(crate) fn check_label(s: &str) -> Result<(), String> {
    if s.is_empty() {
        return Err("must not be empty".into());
    }
    if s.len() > 63 {
        return Err(format!(
            "is {} characters long; at most 63 are allowed",
            s.len()
        ));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        return Err(format!(
            "contains {c:?}; only lowercase letters, digits and `-` are allowed (RFC 1123 label)"
        ));
    }
    if s.starts_with('-') || s.ends_with('-') {
        return Err("must start and end with a letter or digit (RFC 1123 label)".into());
    }
    Ok(())
}

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident, $what:literal, $check:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            /// Validates `s`; the error says what is wrong with it.
            pub fn new(s: &str) -> Result<Self, String> {
                let check: fn(&str) -> Result<(), String> = $check;
                check(s).map_err(|why| format!("invalid {} `{}`: {}", $what, s.escape_debug(), why))?;
                Ok($name(s.to_owned()))
            }

            /// The canonical string form.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(s: String) -> Result<Self, String> {
                $name::new(&s)
            }
        }

        impl From<$name> for String {
            fn from(n: $name) -> String {
                n.0
            }
        }

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                $name::new(s)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_newtype!(
    /// A pool name: a lowercase RFC 1123 label of at most 63 characters.
    PoolName,
    "pool name",
    check_label
);

string_newtype!(
    /// A subnet name: a lowercase RFC 1123 label of at most 63 characters.
    SubnetName,
    "subnet name",
    check_label
);

string_newtype!(
    /// A namespace: one or more `/`-separated RFC 1123 labels, at most 253 characters. Each
    /// segment becomes one directory, so none may be a directory a scope holds
    /// ([`crate::model::layout::ScopeDir`]: `ipampools`, `ipallocations`, `subnets`,
    /// `cooldown`, `ipprefixclaims`, `macs`), which would make it another scope's.
    Namespace,
    "namespace",
    |s| {
        if s.len() > 253 {
            return Err(format!("is {} characters long; at most 253 are allowed", s.len()));
        }
        for segment in s.split('/') {
            check_label(segment).map_err(|why| format!("segment `{segment}` {why}"))?;
            if crate::model::layout::ScopeDir::from_name(segment).is_some() {
                return Err(format!("segment `{segment}` is reserved by the state directory layout"));
            }
        }
        Ok(())
    }
);

string_newtype!(
    /// An owner's uid as read from a stored manifest: 1–128 characters of `[A-Za-z0-9._:-]`.
    /// Reading is lenient so that state written by older versions stays readable and
    /// releasable; every uid ipamctl takes as input goes through [`Uid::parse_uuid`], so only
    /// UUIDs are ever written (`check` reports the others).
    Uid,
    "uid",
    |s| {
        if s.is_empty() || s.len() > 128 {
            return Err("must be 1 to 128 characters long".into());
        }
        let allowed = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':');
        if s.bytes().all(allowed) {
            return Ok(());
        }
        match s.chars().find(|&c| !u8::try_from(c).is_ok_and(allowed)) {
            Some(c) => Err(format!("contains {c:?}; only letters, digits and `-_.:` are allowed")),
            None => Ok(()),
        }
    }
);

impl Uid {
    /// Parses a uid given as input (a flag, a live list): a UUID in the RFC 4122 text form
    /// (`8-4-4-4-12` hex digits, any case), kept lowercase. Anything else is refused, naming
    /// the value; a short integer is most likely bash's `$UID` (the user id), and the
    /// message says so.
    ///
    /// # Examples
    ///
    /// ```
    /// use ipamctl::model::Uid;
    /// let uid = Uid::parse_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E").unwrap();
    /// assert_eq!(uid.as_str(), "0f8fad5b-d9cb-469f-a165-70867728950e");
    /// assert!(Uid::parse_uuid("0").unwrap_err().contains("$UID"));
    /// ```
    pub fn parse_uuid(s: &str) -> Result<Uid, String> {
        // The uuid crate also takes the braced, URN and 32-digit forms: only the hyphenated
        // one is the text form that orchestrators print (virsh, Kubernetes, OpenStack).
        let hyphenated = s.len() == 36
            && s.bytes().enumerate().all(|(i, b)| match i {
                8 | 13 | 18 | 23 => b == b'-',
                _ => b.is_ascii_hexdigit(),
            });
        if hyphenated && let Ok(uuid) = uuid::Uuid::try_parse(s) {
            return Ok(Uid(uuid.hyphenated().to_string()));
        }
        let mut message = format!(
            "invalid uid `{}`: a uid must be a UUID such as `0f8fad5b-d9cb-469f-a165-70867728950e` \
             (RFC 4122 text form, any case)",
            s.escape_debug()
        );
        if !s.is_empty() && s.len() <= 10 && s.bytes().all(|b| b.is_ascii_digit()) {
            message.push_str(
                "; a short number is most likely the shell's `$UID`, which in bash is the user id, \
                 not the VM's uuid: use another variable name",
            );
        }
        Err(message)
    }

    /// True when the uid is a UUID in the lowercase RFC 4122 text form, as ipamctl writes it.
    pub fn is_uuid(&self) -> bool {
        Uid::parse_uuid(&self.0).is_ok_and(|u| u.0 == self.0)
    }
}
