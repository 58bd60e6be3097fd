//! What a branch changes in a state directory, as a reviewer reads it: claims, releases,
//! owner changes, pool changes, and the conflicts with the invariants that git's own merge
//! cannot see (an address claimed on both sides with different owners, an owner claiming
//! on both sides, an allocation edited in place, an allocation left outside its pool).
//!
//! Three trees take part, as in `git diff BASE...HEAD`: `old` (where the branch forked),
//! `new` (the branch: a commit, or the working tree), and `other` (what the base branch did
//! meanwhile, whose claims are checked against the branch's).
//!
//! One file per step: `read.rs` reads the sides, `classify.rs` says what each changed file
//! is to a reviewer, `conflicts.rs` finds the conflicts across files and sides, and
//! `answer.rs` holds what a diff answers.

mod answer;
mod classify;
mod conflicts;
mod read;

pub use answer::{Change, ChangeKind, Conflict, ConflictKind, Diff, short};

use crate::engine::diff::classify::Tally;
use crate::engine::diff::conflicts::{
    across_sides, new_side_prefix_conflicts, other_side_prefix_claims, outside_pools,
    prefix_overlaps,
};
use crate::engine::diff::read::{Reader, Tree};
use crate::engine::git::{Repo, Status};
use crate::error::Result;
use crate::model::layout::locate;
use crate::store::Store;

/// What changed from `old` to `new` (a commit, or the working tree with `None`), with the
/// conflicts against `other` (the base branch's tip, when it moved on since `old`).
pub fn diff(
    repo: &Repo,
    store: &dyn Store,
    old: &str,
    new: Option<&str>,
    other: Option<&str>,
) -> Result<Diff> {
    let reader = Reader { repo, store };
    let new_tree = new.map_or(Tree::Worktree, Tree::Commit);
    let files: Vec<(Status, String)> = repo
        .changed(old, new)?
        .into_iter()
        .filter(|(_, p)| locate(p).is_some())
        .collect();
    let paths: Vec<&str> = files.iter().map(|(_, p)| p.as_str()).collect();
    let before = reader.read(Tree::Commit(old), &paths)?;
    let after = reader.read(new_tree, &paths)?;

    let mut tally = Tally::default();
    for (((_, path), old_bytes), new_bytes) in files.iter().zip(before).zip(after) {
        tally.add(path, old_bytes, new_bytes);
    }
    let Tally {
        changes,
        mut conflicts,
        claims,
        pools_touched,
        prefix_claims,
    } = tally;

    if let Some(other) = other {
        conflicts.extend(across_sides(repo, old, other, &claims)?);
        let theirs = other_side_prefix_claims(repo, &reader, old, other)?;
        conflicts.extend(prefix_overlaps(
            &prefix_claims,
            &theirs,
            "claimed on the base branch since the fork",
        ));
    }
    conflicts.extend(new_side_prefix_conflicts(
        &reader,
        new_tree,
        &prefix_claims,
    )?);
    conflicts.extend(outside_pools(&reader, new_tree, &claims, &pools_touched)?);
    Ok(Diff {
        base: old.to_owned(),
        head: new.map_or_else(|| "working tree".to_owned(), str::to_owned),
        other: other.map(str::to_owned),
        changes,
        conflicts,
    })
}
