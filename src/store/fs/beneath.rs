//! File system calls confined to the state directory: every path is resolved beneath a
//! directory handle and no symlink is ever followed, so nothing a user plants inside the root
//! (a symlink at a manifest, an index file or a directory of the layout) can lead a read or a
//! write outside it.
//!
//! Directories are opened with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, one call the
//! kernel resolves atomically; on a kernel without `openat2` they are opened one component at
//! a time with `O_NOFOLLOW | O_DIRECTORY`, which confines just as well because every
//! component is a single validated name (never `..`). Files are opened relative to their
//! directory's handle with `O_NOFOLLOW`. There is no check followed by a separate open.
//!
//!
//! Opening and reading are in `beneath/read.rs`; writing and removing (a new file always
//! under a fresh name, renamed into place) in `beneath/write.rs`.

mod read;
mod write;

pub use read::*;
pub use write::*;

#[cfg(test)]
mod tests {
    use std::io;
    use std::os::unix::fs::symlink;
    use std::path::Path;

    // By its path, not `super::*`: the same items, named as the layer check reads paths.
    use crate::store::fs::beneath::read::walk;
    use crate::store::fs::beneath::*;

    #[test]
    fn a_symlinked_directory_on_the_way_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("a")).unwrap();
        symlink(outside.path(), root.path().join("a/b")).unwrap();
        let fd = std::fs::File::open(root.path()).unwrap();
        for rel in ["a/b", "a/b/c"] {
            assert!(matches!(
                open_or_create_dir(&fd, Path::new(rel)),
                Err(Refused::Symlink | Refused::NotADirectory)
            ));
            assert!(matches!(
                walk(&fd, Path::new(rel), true),
                Err(Refused::Symlink | Refused::NotADirectory)
            ));
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }

    #[test]
    fn open_parent_opens_the_directory_and_names_the_last_component() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("a/b")).unwrap();
        std::fs::write(root.path().join("a/b/f"), "in").unwrap();
        std::fs::write(outside.path().join("f"), "out").unwrap();
        symlink(outside.path(), root.path().join("a/l")).unwrap();
        let fd = std::fs::File::open(root.path()).unwrap();

        let (dir, name) = open_parent(&fd, Path::new("a/b/f")).unwrap();
        assert_eq!(name, "f");
        assert_eq!(read(&dir, name, 10).unwrap().unwrap().bytes, b"in");
        let (dir, name) = open_parent(&fd, Path::new("f")).unwrap();
        assert_eq!(name, "f");
        assert!(stat(&dir, "a").unwrap().is_some());

        // A symlinked directory on the way is refused, never entered.
        assert!(matches!(
            open_parent(&fd, Path::new("a/l/f")),
            Err(Refused::Symlink | Refused::NotADirectory)
        ));
        for rel in ["", "/a/b/f", "../f", "a/../a/b/f"] {
            assert!(
                matches!(open_parent(&fd, Path::new(rel)), Err(Refused::Io(ref e)) if e.kind() == io::ErrorKind::InvalidInput),
                "{rel}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(outside.path().join("f")).unwrap(),
            "out"
        );
    }

    #[test]
    fn a_write_replaces_a_planted_link_instead_of_writing_through_it() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let victim = outside.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        symlink(&victim, root.path().join("f")).unwrap();
        let fd = std::fs::File::open(root.path()).unwrap();
        assert!(matches!(read(&fd, "f", 10), Err(Refused::Symlink)));
        assert!(!write(&fd, "f", b"new", WriteMode::CreateOnly, false, &beside).unwrap());
        assert!(write(&fd, "f", b"new", WriteMode::Replace, false, &beside).unwrap());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(root.path().join("f")).unwrap(),
            "new"
        );
    }
}
