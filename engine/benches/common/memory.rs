//! This process's peak memory, from Linux's /proc (shared by the import and export benches).

/// VmHWM (peak resident set) of this process, in MiB; NaN where /proc does not say.
pub fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

/// Resets the peak so the next phase is measured alone (Linux clear_refs).
#[allow(dead_code)] // the import bench measures one phase per process
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
