//! Figures of the benchmark's own process, from `/proc/self` (the
//! workspace forbids the `unsafe` that `getrusage` would need). Included
//! by the benchmarks and the simulator, which report CPU time, with
//! `#[path]`.

use std::process::Command;
use std::time::Duration;

/// Ticks per second of `/proc/self/stat`'s CPU times (`getconf CLK_TCK`,
/// 100 when it cannot be asked).
pub fn clock_ticks_per_second() -> u64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// User plus system CPU time of this process (all threads) so far.
// Each file that includes this module uses one of the two readings.
#[allow(dead_code)]
pub fn cpu_time(ticks_per_second: u64) -> Result<Duration, String> {
    let (user, system) = cpu_times(ticks_per_second)?;
    Ok(user + system)
}

/// User and system CPU time of this process (all threads) so far, apart.
#[allow(dead_code)]
pub fn cpu_times(ticks_per_second: u64) -> Result<(Duration, Duration), String> {
    let stat = std::fs::read_to_string("/proc/self/stat").map_err(|e| format!("/proc/self/stat: {e}"))?;
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).ok_or("unexpected /proc/self/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize, name: &str| -> Result<Duration, String> {
        let ticks: u64 =
            fields.get(i).and_then(|v| v.parse().ok()).ok_or_else(|| format!("no {name} in /proc/self/stat"))?;
        Ok(Duration::from_secs_f64(ticks as f64 / ticks_per_second as f64))
    };
    Ok((field(11, "utime")?, field(12, "stime")?))
}
