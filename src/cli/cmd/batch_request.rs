//! A batch's request as the command line it stands for (`allocate -f`, `release -f`): a
//! field maps to the flag of the same name ([`ALLOCATE`], [`RELEASE`]), so a new flag is
//! one line there, and the line is parsed by the very clap types of `allocate` and
//! `release`. A line that is not a valid request (bad JSON, an unknown field, a value of the
//! wrong type, a flag value clap refuses) is that request's failure, exit 2.

use clap::FromArgMatches;
use serde_json::Value;

use crate::cli::GlobalArgs;
use crate::cli::output;
use crate::error::{Error, Result};
use crate::store::Store;

/// How a request's field becomes part of a command line.
#[derive(Clone, Copy)]
pub(super) enum Flag {
    /// A positional argument (several for a list), in the table's order.
    Positional,
    /// `--name VALUE`, once per item of a list.
    Value(&'static str),
    /// `--name` when the field is `true`.
    Switch(&'static str),
}

/// The fields of an `allocate` request and their flags.
pub(super) const ALLOCATE: &[(&str, Flag)] = &[
    ("pool", Flag::Positional),
    ("pools", Flag::Positional),
    ("namespace", Flag::Value("--namespace")),
    ("owner", Flag::Value("--owner")),
    ("uid", Flag::Value("--uid")),
    ("subnet", Flag::Value("--subnet")),
    ("subnets", Flag::Value("--subnet")),
    ("address", Flag::Value("--address")),
    ("within", Flag::Value("--within")),
    ("reserved", Flag::Value("--reserved")),
    ("zone", Flag::Value("--zone")),
    ("mac", Flag::Value("--mac")),
    ("prefixLength", Flag::Value("--prefix-length")),
    ("prefix", Flag::Value("--prefix")),
    ("dryRun", Flag::Switch("--dry-run")),
];

/// The fields of a `release` request and their flags.
pub(super) const RELEASE: &[(&str, Flag)] = &[
    ("pool", Flag::Positional),
    ("address", Flag::Positional),
    ("namespace", Flag::Value("--namespace")),
    ("owner", Flag::Value("--owner")),
    ("uid", Flag::Value("--uid")),
    ("kind", Flag::Value("--kind")),
    ("force", Flag::Switch("--force")),
    ("ignoreNotFound", Flag::Switch("--ignore-not-found")),
    ("dryRun", Flag::Switch("--dry-run")),
];

/// How one request runs: on a store, with the command's clap types (one per worker), given
/// its command line and the batch's global options.
pub(super) type Run<'a> = dyn Fn(&(dyn Store + Sync), &mut clap::Command, Vec<String>, &GlobalArgs) -> Result<Done>
    + Sync
    + 'a;

/// What the batch's own command line gives the requests that do not say otherwise.
pub(super) struct Inherited<'a> {
    pub(super) namespace: Option<&'a str>,
    /// Switch fields the command line sets: a request that leaves one out gets it.
    pub(super) switches: &'a [&'static str],
    /// `--dry-run` on the command line: every request is a dry run, whatever it says (a
    /// preview that a request's `"dryRun": false` turned into a real release would lose
    /// addresses).
    pub(super) dry_run: bool,
}

/// Parses one request's command line with the command's clap types; the namespace apart,
/// as it is a global option.
pub(super) fn parse<T: FromArgMatches>(
    command: &mut clap::Command,
    argv: Vec<String>,
) -> Result<(T, Option<String>)> {
    let matches = command
        .try_get_matches_from_mut(argv)
        .map_err(|e| Error::usage(clap_message(&e)))?;
    let args = T::from_arg_matches(&matches).map_err(|e| Error::usage(clap_message(&e)))?;
    let namespace = matches.get_one::<String>("namespace").cloned();
    Ok((args, namespace))
}

/// clap's error as one line, without its `error: ` and usage: its first paragraph, the
/// lines that name what is missing (`the following required arguments were not provided:`
/// and the next line) joined by spaces.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let paragraph: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    let joined = paragraph.join(" ");
    joined.strip_prefix("error: ").unwrap_or(&joined).to_owned()
}

/// What one request did.
pub enum Done {
    /// `allocate`: the addresses (one per pool) or the prefix, and what was done.
    Held(Vec<String>, &'static str, output::Action),
    /// `release`: what was released (nothing: `unchanged`).
    Freed(Vec<String>, &'static str, output::Action),
}

impl Done {
    pub(super) fn allocated(got: super::allocate::Got) -> Done {
        use super::allocate::Got;
        use super::prefix::PrefixOutcome;
        use crate::cli::output::Action;
        match got {
            Got::Addresses(allocated) => {
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
            Got::Prefix(PrefixOutcome::Held(m, created)) => {
                let action = if created {
                    Action::Created
                } else {
                    Action::Existing
                };
                Done::Held(vec![m.spec.prefix.to_string()], "prefix", action)
            }
            Got::Prefix(PrefixOutcome::Would(p)) => {
                Done::Held(vec![p.to_string()], "prefix", Action::WouldCreate)
            }
        }
    }

    pub(super) fn released(freed: super::release::Freed, dry_run: bool) -> Done {
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

/// The command line `request` stands for: each field as its flag, the batch's namespace and
/// switches where the request sets none.
pub(super) fn argv(
    request: &Value,
    fields: &[(&str, Flag)],
    inherited: &Inherited<'_>,
) -> Result<Vec<String>> {
    let Some(object) = request.as_object() else {
        return Err(Error::usage("a request is an object of fields"));
    };
    if let Some(unknown) = object.keys().find(|k| !fields.iter().any(|(f, _)| f == k)) {
        let known: Vec<&str> = fields.iter().map(|(f, _)| *f).collect();
        return Err(Error::usage(format!(
            "unknown field `{unknown}`; a request has {}",
            known.join(", ")
        )));
    }
    // Two fields for one flag, a single value and a list: a request gives one of them, or
    // what it asks for is a guess (`pool` and `pools` together would claim in both).
    let given = |f: &str| object.get(f).is_some_and(|v| !v.is_null());
    for (one, many) in [("pool", "pools"), ("subnet", "subnets")] {
        if given(one) && given(many) {
            return Err(Error::usage(format!(
                "`{one}` and `{many}` are one field: give `{one}` (a name) or `{many}` (a list)"
            )));
        }
    }
    let (mut flags, mut positional) = (Vec::new(), Vec::new());
    for &(name, flag) in fields {
        let value = object.get(name);
        match (flag, value) {
            (Flag::Switch(s), None | Some(Value::Null | Value::Bool(_)))
                if name == "dryRun" && inherited.dry_run =>
            {
                flags.push(s.into());
            }
            (Flag::Switch(s), None) if inherited.switches.contains(&name) => flags.push(s.into()),
            (Flag::Value("--namespace"), None) => {
                if let Some(ns) = inherited.namespace {
                    flags.push(format!("--namespace={ns}"));
                }
            }
            (_, None | Some(Value::Null)) => {}
            (Flag::Switch(s), Some(Value::Bool(on))) => {
                if *on {
                    flags.push(s.into());
                }
            }
            (Flag::Switch(_), Some(_)) => {
                return Err(Error::usage(format!("`{name}` is true or false")));
            }
            (Flag::Positional, Some(v)) => positional.extend(scalars(name, v)?),
            (Flag::Value(f), Some(v)) => {
                flags.extend(scalars(name, v)?.into_iter().map(|s| format!("{f}={s}")));
            }
        }
    }
    // After `--`, a pool named like a flag is still a pool.
    flags.push("--".into());
    flags.extend(positional);
    Ok(flags)
}

/// A field's value as flag values: a string or number, or a list of them.
fn scalars(name: &str, value: &Value) -> Result<Vec<String>> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(Error::usage(format!(
            "`{name}` is a string or a list of strings"
        ))),
    };
    match value {
        // No value at all: never the same as leaving the field out (`"address": []` is not
        // "any address").
        Value::Array(items) if items.is_empty() => Err(Error::usage(format!(
            "`{name}` is an empty list; leave the field out, or give it a value"
        ))),
        Value::Array(items) => items.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}
