//! CPU time, from `/proc`: a process's (every thread's, exited ones
//! included) or that of this process's threads of one name. Wall time on
//! the shared 2-core machine depends on what else runs; CPU seconds say
//! what the work itself cost.

/// Clock ticks per second of `/proc/*/stat` (`sysconf(_SC_CLK_TCK)`, 100
/// on Linux for every architecture this runs on).
const TICKS: f64 = 100.0;

/// User + system CPU seconds in a `/proc/…/stat` file.
fn stat_seconds(path: &str) -> f64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    // After the command name (in parentheses, which may hold spaces):
    // field 3 (state) onwards; utime and stime are fields 14 and 15.
    let rest = text.rsplit_once(") ").map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    (ticks(11) + ticks(12)) as f64 / TICKS
}

/// CPU seconds of process `pid` ("self" for this one).
pub fn process(pid: &str) -> f64 {
    stat_seconds(&format!("/proc/{pid}/stat"))
}

/// CPU seconds of this process's live threads named `name` (as
/// `/proc/self/task/*/comm` shows it, at most 15 characters).
pub fn threads(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter(|t| {
            std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.trim_end() == name)
        })
        .map(|t| stat_seconds(&t.path().join("stat").to_string_lossy()))
        .sum()
}
