//! The caller's scope: which namespaces a caller may see and which verbs it may use there.
//!
//! Every front end hands the engine a [`Scope`]: the command line run locally holds
//! [`Scope::everything`] (whoever can write the state directory or the database can already
//! do anything); a server holds the scope of the token that authenticated the request. The
//! engine checks it before it takes any lock ([`Scope::check`]), so no path (a resolver, the
//! batch, a future front end) can forget to: an operation that takes `&Scope` cannot be
//! called without one.
//!
//! Outside the scope is "not found", never "forbidden": the caller learns nothing about what
//! other tenants hold. Inside it, a verb the caller lacks is [`Error::Forbidden`].
//!
//! The cluster scope (`None` as a namespace) holds the cluster-scoped pools (public pools,
//! supernets). A tenant's `claim` reaches into it only to claim a floating IP for its own
//! namespace ([`Scope::may_claim_floating`]), never to read or change it.
//!
//! What the public pools hold is every tenant's floating IPs. A tenant's floating IP
//! (`FloatingIP/<tenant>/<name>`) is seen, and touched, only by a caller that sees its
//! tenant's namespace, whatever it holds of the cluster scope ([`Scope::sees_owner`]): a
//! token given the cluster scope for its metrics, or to run one tenant's uplinks, lists,
//! maps, is explained and releases the public pools without another tenant's. Each path
//! that names or touches a holder asks it: the listings, the pool's map, a release by
//! address or by selectors; and what a caller is told in words (an error, a note) names no
//! floating IP of a tenant it does not see ([`Scope::redact`]).

use std::fmt;

use crate::error::{Error, Result};
use crate::model::{Namespace, Owner};

/// How a tenant's floating IP is named to a caller that does not see its tenant.
pub const UNSEEN: &str = "FloatingIP/…";

/// What a caller may do where it may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verb {
    /// The queries: pools, allocations, subnets, VPCs.
    Read,
    /// Claims and releases of addresses (and floating IPs).
    Claim,
    /// Creating and deleting VPCs and subnets (and public pools, in the cluster scope).
    Admin,
}

impl Verb {
    /// Every verb, in order.
    pub const ALL: [Verb; 3] = [Verb::Read, Verb::Claim, Verb::Admin];

    /// The verb's name as a token lists it (`read`, `claim`, `admin`).
    pub fn name(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Claim => "claim",
            Verb::Admin => "admin",
        }
    }

    /// Parses a verb's name.
    pub fn parse(name: &str) -> Result<Verb> {
        Verb::ALL
            .into_iter()
            .find(|verb| verb.name() == name)
            .ok_or_else(|| {
                Error::usage(format!(
                    "unknown verb `{name}`: the verbs are read, claim and admin"
                ))
            })
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A namespace pattern of a token: one namespace (`acme/prod`), the namespaces beneath one
/// (`acme/*`: `acme/prod`, `acme/prod/eu`, not `acme` itself), or every namespace (`*`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pattern {
    /// Exactly this namespace.
    One(Namespace),
    /// Every namespace beneath this one.
    Beneath(Namespace),
    /// Every namespace.
    Any,
}

impl Pattern {
    /// Parses `acme/prod`, `acme/*` or `*`.
    pub fn parse(text: &str) -> Result<Pattern> {
        let bad = |why: String| Error::usage(format!("namespace pattern `{text}`: {why}"));
        if text == "*" {
            return Ok(Pattern::Any);
        }
        match text.strip_suffix("/*") {
            Some(root) => Namespace::new(root)
                .map(Pattern::Beneath)
                .map_err(|e| bad(e.to_string())),
            None => Namespace::new(text)
                .map(Pattern::One)
                .map_err(|e| bad(e.to_string())),
        }
    }

    /// Whether `namespace` matches.
    pub fn matches(&self, namespace: &Namespace) -> bool {
        match self {
            Pattern::One(one) => one == namespace,
            Pattern::Beneath(root) => namespace
                .as_str()
                .strip_prefix(root.as_str())
                .is_some_and(|rest| rest.starts_with('/')),
            Pattern::Any => true,
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::One(namespace) => write!(f, "{namespace}"),
            Pattern::Beneath(root) => write!(f, "{root}/*"),
            Pattern::Any => f.write_str("*"),
        }
    }
}

/// The caller's scope (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    grant: Grant,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Grant {
    /// The local command line: everything.
    Everything,
    /// A token's: these namespaces and, with `cluster`, the cluster scope, each with `verbs`.
    Token {
        patterns: Vec<Pattern>,
        verbs: Vec<Verb>,
        cluster: bool,
    },
}

impl Scope {
    /// The whole scope, as the command line run locally holds it.
    pub fn everything() -> Scope {
        Scope {
            grant: Grant::Everything,
        }
    }

    /// A token's scope: `verbs` in the namespaces `patterns` match, and in the cluster scope
    /// too if `cluster`.
    pub fn token(patterns: Vec<Pattern>, verbs: Vec<Verb>, cluster: bool) -> Scope {
        Scope {
            grant: Grant::Token {
                patterns,
                verbs,
                cluster,
            },
        }
    }

    /// Whether this is the whole scope.
    pub fn is_everything(&self) -> bool {
        matches!(self.grant, Grant::Everything)
    }

    /// Whether the caller may see `namespace` (`None`: the cluster scope) at all.
    pub fn sees(&self, namespace: Option<&Namespace>) -> bool {
        match (&self.grant, namespace) {
            (Grant::Everything, _) => true,
            (Grant::Token { cluster, .. }, None) => *cluster,
            (Grant::Token { patterns, .. }, Some(namespace)) => {
                patterns.iter().any(|pattern| pattern.matches(namespace))
            }
        }
    }

    /// Whether the caller holds `verb` (wherever it sees).
    pub fn holds(&self, verb: Verb) -> bool {
        match &self.grant {
            Grant::Everything => true,
            Grant::Token { verbs, .. } => verbs.contains(&verb),
        }
    }

    /// Checks that the caller may use `verb` on `namespace` (`None`: the cluster scope).
    /// Outside the scope it is [`Error::NotFound`] with `missing` as its message (what the
    /// command would say if the object did not exist), so the answer is the same as for an
    /// object nobody holds; inside it, a verb the caller lacks is [`Error::Forbidden`].
    pub fn check(
        &self,
        verb: Verb,
        namespace: Option<&Namespace>,
        missing: impl FnOnce() -> String,
    ) -> Result<()> {
        if !self.sees(namespace) {
            return Err(Error::NotFound {
                message: missing(),
                hint: None,
            });
        }
        if !self.holds(verb) {
            let place = match namespace {
                Some(namespace) => format!("namespace {namespace}"),
                None => "the cluster scope".to_owned(),
            };
            return Err(Error::Forbidden {
                message: format!("the caller may not {verb} in {place}"),
            });
        }
        Ok(())
    }

    /// Whether the caller may claim (and release) a floating IP for `namespace` from a
    /// public pool: `claim` in that namespace is enough, without any cluster scope.
    pub fn may_claim_floating(&self, namespace: &Namespace) -> bool {
        self.sees(Some(namespace)) && self.holds(Verb::Claim)
    }

    /// The token's patterns (`None` for the whole scope), for listing.
    pub fn patterns(&self) -> Option<&[Pattern]> {
        match &self.grant {
            Grant::Everything => None,
            Grant::Token { patterns, .. } => Some(patterns),
        }
    }

    /// `result` as this caller may see it: for a token's caller, a not-found error loses
    /// its hint (which may name pools or namespaces of other tenants: "a pool `web`
    /// exists in namespace `other`"), so a missing object and one outside the scope read
    /// alike.
    /// Its words are [`Scope::redact`]ed too ([`Scope::told`]).
    pub fn scrub<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Err(Error::NotFound { message, .. }) if !self.is_everything() => Err(Error::NotFound {
                message: self.redact(&message),
                hint: None,
            }),
            other => self.told(other),
        }
    }

    /// `result` with the words of its error [`Scope::redact`]ed: a conflict or a refusal may
    /// name who holds an address ("held by `FloatingIP/acme/prod/fip-web`").
    pub fn told<T>(&self, result: Result<T>) -> Result<T> {
        if self.sees_every_owner() {
            return result;
        }
        let redact = |hint: Option<String>| hint.map(|h| self.redact(&h));
        match result {
            Err(Error::NotFound { message, hint }) => Err(Error::NotFound {
                message: self.redact(&message),
                hint: redact(hint),
            }),
            Err(Error::Conflict { message, hint }) => Err(Error::Conflict {
                message: self.redact(&message),
                hint: redact(hint),
            }),
            Err(Error::Usage { message, hint }) => Err(Error::Usage {
                message: self.redact(&message),
                hint: redact(hint),
            }),
            other => other,
        }
    }

    /// Whether the caller sees the holder `owner` (wherever it sees the pool): any owner but
    /// a tenant's floating IP, and that one only where the caller sees its tenant.
    pub fn sees_owner(&self, owner: &Owner) -> bool {
        owner.tenant().is_none_or(|tenant| self.sees(Some(&tenant)))
    }

    /// Whether the caller sees every owner ([`Scope::sees_owner`]): the whole scope, or a
    /// token's of every namespace.
    pub fn sees_every_owner(&self) -> bool {
        match &self.grant {
            Grant::Everything => true,
            Grant::Token { patterns, .. } => patterns.contains(&Pattern::Any),
        }
    }

    /// `text` as this caller may be told it: each tenant's floating IP it names
    /// (`FloatingIP/<tenant>/<name>`) whose tenant the caller does not see becomes
    /// `FloatingIP/…`. Messages and notes name owners as they display, so a scan of the
    /// words finds them all; the rule that chooses what to name (`sees_owner`) is the same.
    /// The owner's uid, which messages print after its name (`` `FloatingIP/…` (uid U)``),
    /// goes with it: it names no tenant, but it is the unseen owner's all the same.
    pub fn redact(&self, text: &str) -> String {
        const KIND: &str = "FloatingIP/";
        if self.sees_every_owner() || !text.contains(KIND) {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(at) = rest.find(KIND) {
            let (before, from) = rest.split_at(at);
            out.push_str(before);
            let name = &from[KIND.len()..];
            let end = name
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '/' | '_')))
                .unwrap_or(name.len());
            // The tenant is what comes before the name's last `/` (as `Owner::tenant` reads
            // it), whatever follows: a sentence's full stop may have been taken in.
            let tenant = name[..end]
                .rsplit_once('/')
                .and_then(|(tenant, _)| Namespace::new(tenant).ok());
            rest = &name[end..];
            match tenant {
                Some(tenant) if !self.sees(Some(&tenant)) => {
                    out.push_str(UNSEEN);
                    rest = without_uid(rest, &mut out);
                }
                _ => out.push_str(&from[..KIND.len() + end]),
            }
        }
        out.push_str(rest);
        out
    }

    /// Whether the scope holds the cluster scope.
    pub fn cluster(&self) -> bool {
        match &self.grant {
            Grant::Everything => true,
            Grant::Token { cluster, .. } => *cluster,
        }
    }
}

/// `rest`, the text after a redacted owner's name, without the ` (uid U)` that follows it
/// (after the name's closing backquote, which goes to `out`).
fn without_uid<'a>(rest: &'a str, out: &mut String) -> &'a str {
    let (tick, after) = match rest.strip_prefix('`') {
        Some(after) => ("`", after),
        None => ("", rest),
    };
    out.push_str(tick);
    match after
        .strip_prefix(" (uid ")
        .and_then(|uid| uid.split_once(')'))
    {
        Some((_, tail)) => tail,
        None => after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(name: &str) -> Namespace {
        Namespace::new(name).unwrap()
    }

    #[test]
    fn a_cluster_token_sees_and_is_told_of_its_own_tenants_floating_ips_only() {
        let beta = Scope::token(
            vec![Pattern::parse("beta/*").unwrap()],
            vec![Verb::Read],
            true,
        );
        let owner = |s: &str| Owner::parse(s, None).unwrap();
        assert!(beta.sees(None));
        assert!(beta.sees_owner(&owner("FloatingIP/beta/prod/fip-web")));
        assert!(!beta.sees_owner(&owner("FloatingIP/acme/prod/fip-web")));
        assert!(beta.sees_owner(&owner("Node/uplink")));
        assert!(!beta.sees_every_owner());
        let text = "198.51.100.1 in pool `pub-z` is held by `FloatingIP/acme/prod/fip-web.x` (uid u), \
                    FloatingIP/beta/prod/fip-2, FloatingIP/acme/prod/x";
        assert_eq!(
            beta.redact(text),
            "198.51.100.1 in pool `pub-z` is held by `FloatingIP/…`, \
             FloatingIP/beta/prod/fip-2, FloatingIP/…"
        );
        // A seen owner's uid stays; an unseen one's goes with its name, quoted or not.
        assert_eq!(
            beta.redact(
                "`FloatingIP/beta/prod/a` (uid u1); FloatingIP/acme/x (uid u2) and (uid u3"
            ),
            "`FloatingIP/beta/prod/a` (uid u1); FloatingIP/… and (uid u3"
        );
        assert_eq!(
            beta.redact("FloatingIP/acme/x (uid unclosed"),
            "FloatingIP/… (uid unclosed"
        );
        // Not an owner (no tenant in it): left as written.
        assert_eq!(beta.redact("a FloatingIP/ b"), "a FloatingIP/ b");
        let all = Scope::token(vec![Pattern::Any], vec![Verb::Read], true);
        assert!(all.sees_every_owner() && Scope::everything().sees_every_owner());
        assert_eq!(all.redact(text), text);
        let scrubbed = beta.scrub::<()>(Err(Error::conflict(text)));
        assert!(
            matches!(&scrubbed, Err(Error::Conflict { message, .. }) if !message.contains("acme")),
            "{scrubbed:?}"
        );
    }

    #[test]
    fn a_subtree_pattern_matches_beneath_its_root_only() {
        let pattern = Pattern::parse("acme/*").unwrap();
        assert!(pattern.matches(&ns("acme/prod")));
        assert!(pattern.matches(&ns("acme/prod/eu")));
        assert!(!pattern.matches(&ns("acme")));
        assert!(!pattern.matches(&ns("acmex/prod")));
        assert_eq!(pattern.to_string(), "acme/*");
        assert!(Pattern::parse("Acme").is_err());
        assert!(Pattern::parse("acme/*/x").is_err());
    }

    #[test]
    fn outside_the_scope_is_not_found_and_a_missing_verb_forbidden() {
        let scope = Scope::token(
            vec![Pattern::parse("acme").unwrap()],
            vec![Verb::Read],
            false,
        );
        let outside = scope.check(Verb::Read, Some(&ns("other")), || "no pool web".into());
        assert!(
            matches!(outside, Err(Error::NotFound { .. })),
            "{outside:?}"
        );
        let cluster = scope.check(Verb::Read, None, || "no pool public".into());
        assert!(
            matches!(cluster, Err(Error::NotFound { .. })),
            "{cluster:?}"
        );
        let verb = scope.check(Verb::Claim, Some(&ns("acme")), || unreachable!());
        assert!(matches!(verb, Err(Error::Forbidden { .. })), "{verb:?}");
        assert!(
            scope
                .check(Verb::Read, Some(&ns("acme")), || unreachable!())
                .is_ok()
        );
        assert!(!scope.may_claim_floating(&ns("acme")));
        assert!(
            Scope::everything()
                .check(Verb::Admin, None, || unreachable!())
                .is_ok()
        );
    }
}

#[cfg(test)]
#[path = "scope_tests.rs"]
mod store_tests;
