//! What a benchmark prints about the machine it ran on, so a number in `BENCHMARKS.md` comes
//! with its context: the CPU, how busy the machine was, the open-file limit. Linux `/proc`;
//! elsewhere the values read as unknown.

/// `nproc N, CPU model, M GiB RAM`.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|rest| rest.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".to_string());
    let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches(" kB").parse::<u64>().ok())
        })
        .map_or_else(String::new, |kb| {
            format!(", {:.1} GiB RAM", kb as f64 / 1024.0 / 1024.0)
        });
    format!("nproc {nproc}, {model}{memory}")
}

/// The 1-, 5- and 15-minute load averages, or `?`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// The soft limit on open files of this process (inherited by what it spawns), or 0.
pub fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_this_machine() {
        assert!(machine().starts_with("nproc "));
        assert!(!load_average().is_empty());
    }
}
