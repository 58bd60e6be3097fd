//! The floor under any look-up that validates every file by its status: list a directory,
//! then `fstatat` every name in it relative to the directory's handle, on as many threads as
//! ipamctl's scans use. `bench/run` times it beside ipamctl's queries.
//!
//!     cargo run --release --example stat_floor -- DIR [THREADS]
//!
//! THREADS (default: as many as ipamctl's scans use) set to 1 gives the serial floor that
//! issue 47's single-claim figures are quoted against.

use std::os::fd::OwnedFd;

use rustix::fs::{AtFlags, Dir, Mode, OFlags, openat, statat};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args_os()
        .nth(1)
        .ok_or("usage: stat_floor DIR [THREADS]")?;
    let fd: OwnedFd = openat(
        rustix::fs::CWD,
        dir.as_os_str(),
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let mut names = Vec::new();
    for entry in Dir::read_from(&fd)? {
        let name = entry?.file_name().to_owned();
        if name.to_bytes() != b"." && name.to_bytes() != b".." {
            names.push(name);
        }
    }
    let threads = match std::env::args().nth(2) {
        Some(n) => n.parse::<usize>().map_err(|_| "THREADS: a number")?.max(1),
        None => std::thread::available_parallelism().map_or(1, |n| n.get().min(8)),
    };
    let chunk = names.len().div_ceil(threads).max(1);
    let found: usize = std::thread::scope(|s| {
        let workers: Vec<_> = names
            .chunks(chunk)
            .map(|part| {
                let fd = &fd;
                s.spawn(move || {
                    part.iter()
                        .filter(|name| {
                            statat(fd, name.as_c_str(), AtFlags::SYMLINK_NOFOLLOW).is_ok()
                        })
                        .count()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).sum()
    });
    println!("{found} of {} names stated", names.len());
    Ok(())
}
