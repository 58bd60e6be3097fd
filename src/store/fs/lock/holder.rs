//! Who holds a byte of the lock file, for the message of a lock wait that timed out: from
//! `/proc/locks`, and where it gives no pid (open-file-description locks), from the
//! `/proc/PID/fdinfo` files of the processes this user may look at.

/// Does a line of `/proc/locks` (or a `lock:` line of a `/proc/PID/fdinfo` file) cover byte
/// `offset` of inode `ino`? Its pid field, if so (`-1` for open-file-description locks).
fn lock_line(line: &str, ino: u64, offset: i64) -> Option<i64> {
    // `1: OFDLCK ADVISORY WRITE -1 08:01:5678 100 100`
    let fields: Vec<&str> = line.split_whitespace().collect();
    let at = fields.iter().position(|f| f.matches(':').count() == 2)?;
    let file_ino = fields[at].rsplit(':').next()?.parse::<u64>().ok()?;
    let start = fields.get(at + 1)?.parse::<i64>().ok()?;
    let end = fields.get(at + 2)?;
    let covers = start <= offset && (*end == "EOF" || end.parse::<i64>().ok()? >= offset);
    (file_ino == ino && covers).then(|| fields.get(at.checked_sub(1)?)?.parse::<i64>().ok())?
}

/// Who holds byte `offset` of inode `ino`: `process P (`command`)`. `/proc/locks` gives no
/// pid for open-file-description locks, so the descriptors of every process this user may
/// look at are searched (`/proc/PID/fdinfo` lists the locks held through each); only on a
/// timeout, so its cost does not matter.
pub(super) fn holder(ino: u64, offset: i64) -> Option<String> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let mut pid = locks
        .lines()
        .find_map(|line| lock_line(line, ino, offset))?;
    if pid <= 0 {
        let me = i64::from(std::process::id());
        pid = std::fs::read_dir("/proc")
            .ok()?
            .flatten()
            .filter_map(|p| p.file_name().to_str()?.parse::<i64>().ok())
            .filter(|&p| p != me)
            .find(|p| {
                let Ok(fds) = std::fs::read_dir(format!("/proc/{p}/fdinfo")) else {
                    return false;
                };
                fds.flatten().any(|fd| {
                    std::fs::read_to_string(fd.path()).is_ok_and(|info| {
                        info.lines()
                            .filter_map(|l| l.strip_prefix("lock:"))
                            .any(|l| lock_line(l, ino, offset).is_some())
                    })
                })
            })
            .unwrap_or(-1);
    }
    if pid <= 0 {
        return Some("another process".into());
    }
    let command = std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| {
            let text: String = String::from_utf8_lossy(&c)
                .replace('\0', " ")
                .trim()
                .to_owned();
            text.chars().take(80).collect::<String>()
        })
        .unwrap_or_default();
    Some(if command.is_empty() {
        format!("process {pid}")
    } else {
        format!("process {pid} (`{command}`)")
    })
}
