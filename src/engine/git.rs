//! Reading a state directory's git history through the `git` executable: argument vectors
//! only, never a shell string, and revisions checked by `git rev-parse` before use. Paths
//! are relative to the state directory (which may be a subdirectory of the repository).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{Error, Result};

/// The directories of the layout that hold manifests; nothing else is diffed or logged.
pub const MANIFEST_DIRS: [&str; 2] = ["cluster", "namespaces"];

/// A state directory inside a git working tree.
#[derive(Debug)]
pub struct Repo {
    root: PathBuf,
}

/// How a file changed between two trees, as `git diff --name-status` says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// The file is new.
    Added,
    /// The file is gone.
    Deleted,
    /// The file's contents (or type) changed.
    Modified,
}

/// One commit of a log, with the manifest files it touched.
#[derive(Clone, Debug)]
pub struct Commit {
    /// The full commit id.
    pub id: String,
    /// `Name <email>` of the author.
    pub author: String,
    /// The author date, ISO 8601.
    pub date: String,
    /// The subject line.
    pub subject: String,
    /// The files, relative to the state directory.
    pub files: Vec<(Status, String)>,
}

impl Repo {
    /// The state directory at `root`, which must be inside a git working tree (exit 3 if
    /// it is not, with a hint).
    pub fn open(root: &Path) -> Result<Repo> {
        let repo = Repo {
            root: root.to_path_buf(),
        };
        match repo.git(&["rev-parse", "--is-inside-work-tree"]) {
            Ok(out) if out.trim_ascii() == b"true" => Ok(repo),
            _ => Err(Error::NotFound {
                message: format!("{}: not in a git working tree", root.display()),
                hint: Some("`git init` the state directory (or a parent) and commit it".into()),
            }),
        }
    }

    /// Runs git in the state directory; its stdout, or its first stderr line as an error.
    fn git(&self, args: &[&str]) -> Result<Vec<u8>> {
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io("git", e))?;
        if out.status.success() {
            return Ok(out.stdout);
        }
        let said = String::from_utf8_lossy(&out.stderr);
        Err(Error::Usage {
            message: format!(
                "git {}: {}",
                args.first().copied().unwrap_or_default(),
                said.lines()
                    .next()
                    .unwrap_or("failed")
                    .trim_start_matches("fatal: ")
            ),
            hint: None,
        })
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        // Paths and messages as plumbing expects them, whatever the user's configuration.
        cmd.arg("-C")
            .arg(&self.root)
            .args([
                "-c",
                "core.quotePath=false",
                "-c",
                "log.showSignature=false",
            ])
            .args(args)
            .env("LC_ALL", "C")
            .env_remove("GIT_DIR")
            .env_remove("GIT_WORK_TREE");
        cmd
    }

    /// The commit `rev` names (exit 2 if it names none).
    pub fn commit(&self, rev: &str) -> Result<String> {
        if rev.starts_with('-') {
            return Err(Error::invalid(
                "REVISION",
                format!("`{rev}` is not a revision"),
            ));
        }
        let spec = format!("{rev}^{{commit}}");
        match self.git(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ]) {
            Ok(id) => Ok(String::from_utf8_lossy(&id).trim().to_owned()),
            Err(_) => Err(Error::invalid(
                "REVISION",
                format!("`{rev}` names no commit of this repository"),
            )),
        }
    }

    /// The upstream branch of the current branch, if it has one.
    pub fn upstream(&self) -> Option<String> {
        let out = self
            .git(&[
                "rev-parse",
                "--abbrev-ref",
                "--symbolic-full-name",
                "@{upstream}",
            ])
            .ok()?;
        let name = String::from_utf8_lossy(&out).trim().to_owned();
        (!name.is_empty()).then_some(name)
    }

    /// The best common ancestor of two commits, if they have one.
    pub fn merge_base(&self, a: &str, b: &str) -> Option<String> {
        let out = self.git(&["merge-base", a, b]).ok()?;
        let id = String::from_utf8_lossy(&out).trim().to_owned();
        (!id.is_empty()).then_some(id)
    }

    /// The manifest files that differ between commit `old` and commit `new`, or with `new`
    /// `None`, the working tree as it is, files git does not track yet included.
    pub fn changed(&self, old: &str, new: Option<&str>) -> Result<Vec<(Status, String)>> {
        let mut args = vec![
            "diff",
            "--name-status",
            "--no-renames",
            "--relative",
            "-z",
            old,
        ];
        if let Some(new) = new {
            args.push(new);
        }
        args.push("--");
        args.extend(MANIFEST_DIRS);
        let out = self.git(&args)?;
        let mut fields = out.split(|b| *b == 0).filter(|f| !f.is_empty());
        let mut files = Vec::new();
        while let (Some(status), Some(path)) = (fields.next(), fields.next()) {
            let status = match status.first() {
                Some(b'A') => Status::Added,
                Some(b'D') => Status::Deleted,
                _ => Status::Modified,
            };
            files.push((status, String::from_utf8_lossy(path).into_owned()));
        }
        if new.is_none() {
            let mut args = vec!["ls-files", "--others", "--exclude-standard", "-z", "--"];
            args.extend(MANIFEST_DIRS);
            let out = self.git(&args)?;
            for path in out.split(|b| *b == 0).filter(|f| !f.is_empty()) {
                files.push((Status::Added, String::from_utf8_lossy(path).into_owned()));
            }
        }
        files.sort_by(|a, b| a.1.cmp(&b.1));
        Ok(files)
    }

    /// The manifest files of `rev` under `dir` (relative to the state directory).
    pub fn list(&self, rev: &str, dir: &str) -> Result<Vec<String>> {
        let spec = format!("{rev}:./{dir}");
        match self.git(&["ls-tree", "--name-only", "-z", &spec]) {
            Ok(out) => Ok(out
                .split(|b| *b == 0)
                .filter(|f| !f.is_empty())
                .map(|f| String::from_utf8_lossy(f).into_owned())
                .collect()),
            // No such directory in that revision.
            Err(_) => Ok(Vec::new()),
        }
    }

    /// The contents of each `(rev, path)` (`None` where the revision has no such file),
    /// read by one `git cat-file --batch`.
    pub fn blobs(&self, wanted: &[(String, String)]) -> Result<Vec<Option<Vec<u8>>>> {
        if wanted.is_empty() {
            return Ok(Vec::new());
        }
        let mut child = self
            .command(&["cat-file", "--batch"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| Error::io("git", e))?;
        let mut input = String::new();
        for (rev, path) in wanted {
            // `./` resolves the path from the state directory, not the repository's root.
            input.push_str(&format!("{rev}:./{path}\n"));
        }
        let mut stdin = child.stdin.take().expect("piped stdin");
        // Written from a thread: git answers while it reads, and a full pipe would block both.
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
        let mut blobs = Vec::with_capacity(wanted.len());
        for _ in wanted {
            let mut header = String::new();
            out.read_line(&mut header)
                .map_err(|e| Error::io("git", e))?;
            let size = header
                .trim_end()
                .rsplit_once(' ')
                .filter(|_| !header.trim_end().ends_with(" missing"))
                .and_then(|(_, size)| size.parse::<usize>().ok());
            match size {
                Some(size) => {
                    let mut blob = vec![0; size + 1];
                    out.read_exact(&mut blob).map_err(|e| Error::io("git", e))?;
                    blob.truncate(size);
                    blobs.push(Some(blob));
                }
                None => blobs.push(None),
            }
        }
        drop(out);
        let _ = writer.join();
        let _ = child.wait();
        Ok(blobs)
    }

    /// The commits that touched the manifest files matching `pathspecs` (git's glob
    /// pathspecs, relative to the state directory), newest first; with `pickaxe`, only
    /// those whose diff adds or removes a line matching that regular expression.
    pub fn log(&self, pathspecs: &[String], pickaxe: Option<&str>) -> Result<Vec<Commit>> {
        let pick = pickaxe.map(|p| format!("-G{p}"));
        let mut args = vec![
            "log",
            "--no-renames",
            "--name-status",
            "--relative",
            "--format=%x1e%H%x1f%an <%ae>%x1f%aI%x1f%s",
        ];
        if let Some(pick) = &pick {
            args.push(pick);
        }
        args.push("--");
        let specs: Vec<String> = pathspecs.iter().map(|p| format!(":(glob){p}")).collect();
        args.extend(specs.iter().map(String::as_str));
        let out = self.git(&args)?;
        let text = String::from_utf8_lossy(&out);
        let mut commits = Vec::new();
        for record in text.split('\x1e').filter(|r| !r.trim().is_empty()) {
            let mut lines = record.lines();
            let head: Vec<&str> = lines.next().unwrap_or_default().split('\x1f').collect();
            let [id, author, date, subject] = head[..] else {
                continue;
            };
            let files = lines
                .filter_map(|l| l.split_once('\t'))
                .map(|(status, path)| {
                    let status = match status {
                        "A" => Status::Added,
                        "D" => Status::Deleted,
                        _ => Status::Modified,
                    };
                    (status, path.to_owned())
                })
                .collect();
            commits.push(Commit {
                id: id.to_owned(),
                author: author.to_owned(),
                date: date.to_owned(),
                subject: subject.to_owned(),
                files,
            });
        }
        Ok(commits)
    }
}
