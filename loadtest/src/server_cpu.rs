//! The server's CPU time, read from `/proc` at the edges of the measured window, so that a
//! report can say what each answer cost the server (`--server-pid`).
//!
//! Each thread's `/proc/PID/task/TID/schedstat` starts with the nanoseconds it has run on a
//! CPU; their sum is the process's CPU time at nanosecond resolution (`/proc/PID/stat` counts
//! in clock ticks of 10 ms, too coarse for short steps). A thread that ends within the
//! window takes its time with it; modgate's shards, workers and blocking threads live as
//! long as the server.

use std::io;
use std::path::Path;

/// The first field of a `schedstat` line: nanoseconds on a CPU.
pub fn parse_schedstat(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    text.split_ascii_whitespace().next()?.parse().ok()
}

/// CPU nanoseconds used so far by every thread of process `pid`.
pub fn process_cpu_ns(pid: u32) -> io::Result<u64> {
    let tasks = Path::new("/proc").join(pid.to_string()).join("task");
    let mut total = 0u64;
    let mut read = 0;
    for task in std::fs::read_dir(tasks)? {
        let path = task?.path().join("schedstat");
        // A thread may end between the listing and the read: it no longer counts.
        let Ok(bytes) = std::fs::read(&path) else {
            continue;
        };
        let ns = parse_schedstat(&bytes).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: not a schedstat line", path.display()),
            )
        })?;
        total = total.saturating_add(ns);
        read += 1;
    }
    if read == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no thread of process {pid} could be read"),
        ));
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_lines() {
        assert_eq!(parse_schedstat(b"123456789 2000 17\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(b"0 0 0"), Some(0));
        assert_eq!(parse_schedstat(b""), None);
        assert_eq!(parse_schedstat(b"-1 2 3"), None);
        assert_eq!(parse_schedstat(b"\xff\xfe"), None);
    }

    #[test]
    fn a_busy_process_is_seen_using_cpu() {
        // A process of one busy thread (this test process's own threads come and go with
        // the other tests, which would take their time with them).
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let pid = busy.id();
        let before = process_cpu_ns(pid).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
        let used = process_cpu_ns(pid).unwrap().saturating_sub(before);
        busy.kill().unwrap();
        busy.wait().unwrap();
        // 200 ms of wall time on a shared machine: at least a quarter of it on a CPU.
        assert!(
            used >= 50_000_000,
            "200 ms of spinning counted as {used} ns"
        );
        assert!(process_cpu_ns(u32::MAX).is_err());
    }
}
