//! Label selectors, as kubectl's `-l/--selector` takes them: equality-based requirements
//! (`key=value`, `key==value`, `key!=value`, `key`, `!key`), comma-separated, all of which
//! must hold.

use std::collections::BTreeMap;
use std::fmt;

/// One requirement of a [`LabelSelector`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value`: the label is absent or has another value (as in Kubernetes).
    NotEquals(String, String),
    /// `key`: the label is present.
    Exists(String),
    /// `!key`: the label is absent.
    Absent(String),
}

/// A parsed label selector: every requirement must hold. The empty selector selects all.
///
/// # Examples
///
/// ```
/// use ipamctl::model::selector::LabelSelector;
/// use std::collections::BTreeMap;
/// let sel = LabelSelector::parse("tier=web,env!=prod").unwrap();
/// let labels = BTreeMap::from([("tier".to_owned(), "web".to_owned())]);
/// assert!(sel.matches(&labels));
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `text`; an error names the requirement that is wrong.
    pub fn parse(text: &str) -> Result<LabelSelector, String> {
        let mut requirements = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                Requirement::NotEquals(key(k, part)?, value(v, part)?)
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                Requirement::Equals(key(k, part)?, value(v, part)?)
            } else if let Some(k) = part.strip_prefix('!') {
                Requirement::Absent(key(k, part)?)
            } else {
                Requirement::Exists(key(part, part)?)
            };
            requirements.push(requirement);
        }
        Ok(LabelSelector { requirements })
    }

    /// Do `labels` satisfy every requirement?
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| match r {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Absent(k) => !labels.contains_key(k),
        })
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, r) in self.requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            match r {
                Requirement::Equals(k, v) => write!(f, "{k}={v}")?,
                Requirement::NotEquals(k, v) => write!(f, "{k}!={v}")?,
                Requirement::Exists(k) => f.write_str(k)?,
                Requirement::Absent(k) => write!(f, "!{k}")?,
            }
        }
        Ok(())
    }
}

/// A label key: an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters of `[A-Za-z0-9._-]`, beginning and ending alphanumeric.
fn key(k: &str, part: &str) -> Result<String, String> {
    let k = k.trim();
    let name = k.rsplit_once('/').map_or(
        k,
        |(prefix, name)| {
            if prefix.is_empty() { "" } else { name }
        },
    );
    if !is_label_value(name) || name.is_empty() {
        return Err(format!(
            "`{}`: `{}` is not a label key (e.g. `tier` or `pivirt.hu/managed-by`)",
            part.escape_debug(),
            k.escape_debug()
        ));
    }
    Ok(k.to_owned())
}

/// A label value: empty, or at most 63 characters of `[A-Za-z0-9._-]`, beginning and
/// ending alphanumeric.
fn value(v: &str, part: &str) -> Result<String, String> {
    let v = v.trim();
    if !is_label_value(v) {
        return Err(format!(
            "`{}`: `{}` is not a label value",
            part.escape_debug(),
            v.escape_debug()
        ));
    }
    Ok(v.to_owned())
}

fn is_label_value(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.is_empty()
        || (s.len() <= 63
            && s.starts_with(alnum)
            && s.ends_with(alnum)
            && s.chars().all(|c| alnum(c) || matches!(c, '.' | '_' | '-')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn every_requirement_must_hold() {
        let l = labels(&[("pivirt.hu/managed-by", "director"), ("tier", "web")]);
        let yes = [
            "tier=web",
            "tier==web",
            "tier",
            "!env",
            "env!=prod",
            "pivirt.hu/managed-by=director,tier=web",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
        for s in ["tier=db", "tier!=web", "env", "!tier", "tier=web,env"] {
            assert!(!LabelSelector::parse(s).unwrap().matches(&l), "{s}");
        }
    }

    #[test]
    fn malformed_requirements_are_named() {
        for s in [
            "",
            "tier=web,",
            "=web",
            "ti er=web",
            "tier=we b",
            "/x=1",
            "-a=b",
        ] {
            let err = LabelSelector::parse(s).unwrap_err();
            assert!(err.starts_with('`'), "{s}: {err}");
        }
    }

    #[test]
    fn displays_as_parsed() {
        let s = "a=1,b!=2,c,!d";
        assert_eq!(LabelSelector::parse(s).unwrap().to_string(), s);
    }
}
