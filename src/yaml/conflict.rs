//! State files left with git's merge-conflict markers (`<<<<<<<`, `=======`, `>>>>>>>`): two
//! branches claimed the same address for different owners, or edited one file. Every reader
//! recognises them and says so instead of a bare parser error; the address stays taken (the
//! file is still there) until someone resolves it, and `check` says how, keeping both owners'
//! uids so that the owner whose side is dropped can claim again as itself.

use crate::model::AllocationManifest;

/// The two versions of a conflicted file: the text outside the markers, with each side's
/// lines in turn (a diff3 base section is dropped).
#[derive(Debug, PartialEq, Eq)]
pub struct Sides {
    /// The branch merged into (`git checkout --ours`).
    pub ours: String,
    /// The branch merged in (`git checkout --theirs`).
    pub theirs: String,
}

/// A conflict marker: seven of `c` at the start of a line, then nothing or a space.
fn is_marker(line: &str, c: char) -> bool {
    let rest = line.trim_end_matches(['\r', '\n']);
    rest.len() >= 7
        && rest.chars().take(7).all(|x| x == c)
        && (rest.len() == 7 || rest[7..].starts_with(' '))
}

/// The sides of `text` if it holds a complete set of conflict markers; `None` otherwise.
pub fn sides(text: &str) -> Option<Sides> {
    #[derive(PartialEq)]
    enum In {
        Both,
        Ours,
        Base,
        Theirs,
    }
    let mut at = In::Both;
    let (mut ours, mut theirs) = (String::new(), String::new());
    let mut seen = false;
    for line in text.split_inclusive('\n') {
        at = match at {
            In::Both if is_marker(line, '<') => In::Ours,
            In::Ours if is_marker(line, '|') => In::Base,
            In::Ours | In::Base if is_marker(line, '=') => In::Theirs,
            In::Theirs if is_marker(line, '>') => {
                seen = true;
                In::Both
            }
            at => {
                if matches!(at, In::Both | In::Ours) {
                    ours.push_str(line);
                }
                if matches!(at, In::Both | In::Theirs) {
                    theirs.push_str(line);
                }
                at
            }
        };
    }
    (seen && at == In::Both).then_some(Sides { ours, theirs })
}

/// What a side holds, as a message names it.
fn holder(side: &Result<AllocationManifest, String>) -> String {
    match side {
        Ok(m) => format!("`{}`", m.spec.owner.with_uid()),
        Err(_) => "a version that does not parse".into(),
    }
}

/// Why an allocation file with conflict markers is no manifest: both sides' owners. `decode`
/// reads one side.
pub fn allocation_message(
    sides: &Sides,
    decode: impl Fn(&str) -> Result<AllocationManifest, String>,
) -> String {
    format!(
        "unresolved merge conflict (git conflict markers): ours holds it for {}, theirs for {}; the address stays taken until it is resolved (`ipamctl check` says how)",
        holder(&decode(&sides.ours)),
        holder(&decode(&sides.theirs)),
    )
}

/// Where the owner whose side of a conflict is dropped can claim again, as the caller (who
/// knows every pool) finds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Elsewhere {
    /// In its own pool, which has a free address.
    Same,
    /// From the public pools of this zone (`allocate --zone`): its pool has no free address
    /// left, another pool of the zone has.
    Zone(String),
    /// From this other pool of its scope and family: its pool has no free address left.
    Pool(String),
    /// Nowhere: neither its pool nor any other it may use has a free address.
    Nowhere,
}

/// `ipamctl allocate` for the owner of `m` with its uid, where `elsewhere` says: how the
/// owner whose side was dropped claims again as itself (without `--uid` it would be another
/// owner). `None` when there is nowhere.
fn reallocate(m: &AllocationManifest, elsewhere: &Elsewhere) -> Option<String> {
    let mut command = match elsewhere {
        Elsewhere::Same => format!("ipamctl allocate {}", m.spec.pool),
        Elsewhere::Pool(pool) => format!("ipamctl allocate {pool}"),
        Elsewhere::Zone(zone) => format!("ipamctl allocate --zone {zone}"),
        Elsewhere::Nowhere => return None,
    };
    if let (Some(ns), false) = (
        &m.metadata.namespace,
        matches!(elsewhere, Elsewhere::Zone(_)),
    ) {
        command.push_str(&format!(" -n {ns}"));
    }
    command.push_str(&format!(" --owner {}", m.spec.owner));
    if let Some(uid) = m.spec.owner.uid() {
        command.push_str(&format!(" --uid {uid}"));
    }
    Some(command)
}

/// The `check` finding for a conflicted allocation file at `path` (relative to the state
/// directory): both owners and the exact commands that keep one side and claim again for
/// the other owner, with its uid, where `elsewhere` says it can (its own pool is usually
/// full: both branches took its last free address); or, when nowhere, that plainly.
pub fn allocation_finding(
    path: &str,
    sides: &Sides,
    decode: impl Fn(&str) -> Result<AllocationManifest, String>,
    elsewhere: impl Fn(&AllocationManifest) -> Elsewhere,
) -> String {
    let (ours, theirs) = (decode(&sides.ours), decode(&sides.theirs));
    let two_owners =
        ours.as_ref().ok().map(|o| &o.spec.owner) != theirs.as_ref().ok().map(|t| &t.spec.owner);
    let mut full = None;
    let mut keep = |side: &str, other: &Result<AllocationManifest, String>| {
        let mut steps = format!("git checkout --{side} -- {path} && git add {path}");
        if let (Ok(m), true) = (other, two_owners) {
            let there = elsewhere(m);
            if there != Elsewhere::Same {
                full = Some((m.spec.pool.to_string(), there == Elsewhere::Nowhere));
            }
            if let Some(command) = reallocate(m, &there) {
                steps.push_str(&format!(" && {command}"));
            }
        }
        format!("`{steps}`")
    };
    let (keep_ours, keep_theirs) = (keep("ours", &theirs), keep("theirs", &ours));
    let tail = match full {
        None => String::new(),
        Some((pool, false)) => format!(
            " (pool `{pool}` has no free address left, so the other owner claims elsewhere)"
        ),
        Some((pool, true)) => format!(
            "; pool `{pool}` has no free address left and no other pool the other owner may use has one: it gets an address only after one is released (`ipamctl list --pool {pool}`) or a pool is widened"
        ),
    };
    format!(
        "unresolved merge conflict: ours holds the address for {}, theirs for {}; it stays taken until resolved. Keep ours: {keep_ours}; or keep theirs: {keep_theirs}{tail}",
        holder(&ours),
        holder(&theirs),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sides_split_at_the_markers_and_keep_the_common_lines() {
        let text = "a\n<<<<<<< HEAD\nb\n||||||| base\nx\n=======\nc\n>>>>>>> feature\nd\n";
        assert_eq!(
            sides(text),
            Some(Sides {
                ours: "a\nb\nd\n".into(),
                theirs: "a\nc\nd\n".into(),
            })
        );
        assert_eq!(sides("a\n<<<<<<< HEAD\nb\n"), None);
        assert_eq!(sides("name: <<<<<<<\n=======\n"), None);
        assert_eq!(sides("a: b\n"), None);
    }
}
