//! What a benchmark reads of a process from `/proc`: its CPU time and
//! resident memory; and the open-file limit raised for many connections.
//!
//! Linux only, as the benches that use it.

use std::time::Duration;

use anyhow::{bail, Context, Result};

/// Raise this process's open-file limit to its hard maximum (children
/// started afterwards inherit it); returns the new soft limit.
#[allow(unsafe_code)] // two syscalls on a local struct (see SAFETY below)
pub fn raise_nofile() -> Result<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            bail!("getrlimit failed");
        }
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            bail!("setrlimit failed");
        }
    }
    Ok(lim.rlim_cur)
}

/// CPU time (user + system) used so far by process `pid`, from
/// `/proc/<pid>/stat` (fields 14 and 15, in clock ticks).
pub fn cpu_of(pid: u32) -> Result<Duration> {
    stat_cpu(&format!("/proc/{pid}/stat"))
}

/// CPU time used so far by this process's live threads named `name` (as
/// `/proc/self/task/*/comm` shows it, at most 15 characters): a
/// controller run on threads of its own inside a bench, told apart from
/// the API server beside it. Threads that ended are not counted.
pub fn cpu_of_threads(name: &str) -> Result<Duration> {
    let mut sum = Duration::ZERO;
    for task in std::fs::read_dir("/proc/self/task")? {
        let task = task?.path();
        // A thread that ended since the listing has no files left: skip it.
        let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        if comm.trim_end() == name {
            if let Ok(cpu) = stat_cpu(&task.join("stat").to_string_lossy()) {
                sum += cpu;
            }
        }
    }
    Ok(sum)
}

/// User + system CPU time in a `/proc/…/stat` file.
fn stat_cpu(path: &str) -> Result<Duration> {
    let stat = std::fs::read_to_string(path)?;
    // The command name (field 2) may hold spaces: count after its `)`.
    let rest = stat.rsplit_once(')').context("no ) in stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| -> Result<u64> {
        fields
            .get(i)
            .context("/proc/<pid>/stat is too short")?
            .parse::<u64>()
            .context("a CPU time in /proc/<pid>/stat is not a number")
    };
    let ticks = field(11)? + field(12)?;
    #[allow(unsafe_code)] // SAFETY: sysconf takes and returns integers.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Ok(Duration::from_nanos(ticks * 1_000_000_000 / hz))
}

/// Resident memory of process `pid` now, in KiB (`VmRSS`).
pub fn rss_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmRSS:")
}

/// The most resident memory process `pid` has had, in KiB (`VmHWM`).
pub fn peak_rss_kib(pid: u32) -> Result<u64> {
    status_kib(pid, "VmHWM:")
}

fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_memory_and_cpu_time() {
        let me = std::process::id();
        let rss = rss_kib(me).unwrap_or(0);
        assert!(rss > 0, "VmRSS read as {rss} KiB");
        assert!(peak_rss_kib(me).unwrap_or(0) >= rss);
        // Spin until the tick counter moves (it counts in 1/100 s): a
        // reader that always answered zero never gets there.
        let start = std::time::Instant::now();
        let mut x = 0u64;
        let mut moved = false;
        while !moved && start.elapsed() < Duration::from_secs(30) {
            for _ in 0..1_000_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            moved = cpu_of(me).map(|d| d > Duration::ZERO).unwrap_or(false);
        }
        assert!(x > 0);
        assert!(moved, "cpu_of never read more than zero");
    }

    #[test]
    fn a_named_thread_has_its_own_cpu_time() {
        // The thread spins until it reads its own time at 50 ms or more:
        // a reader that missed it (or always answered zero) spins 30 s
        // and then fails below.
        let spin = std::thread::Builder::new()
            .name("bench-spin".into())
            .spawn(|| {
                let start = std::time::Instant::now();
                let mut x = 0u64;
                let mut seen = Duration::ZERO;
                while seen < Duration::from_millis(50) && start.elapsed() < Duration::from_secs(30)
                {
                    for _ in 0..1_000_000 {
                        x = x.wrapping_add(std::hint::black_box(1));
                    }
                    seen = cpu_of_threads("bench-spin").unwrap_or_default();
                }
                (x, seen)
            })
            .unwrap();
        let (spun, seen) = spin.join().unwrap();
        assert!(spun > 0);
        assert!(seen >= Duration::from_millis(50), "read {seen:?}");
        assert_eq!(cpu_of_threads("no-such-thread").unwrap(), Duration::ZERO);
    }
}
