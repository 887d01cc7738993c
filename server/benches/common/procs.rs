//! What the server benchmarks share: the binaries beside the benchmark's own build, processes
//! that die with the benchmark, free ports, a process's CPU and memory from /proc, waiting for a
//! server, and signing in.
#![allow(dead_code)] // Each benchmark uses its own part of this.

use std::{
    net::TcpListener,
    path::PathBuf,
    process::Child,
    time::{Duration, Instant},
};

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A binary of this workspace built in the benchmark's own profile (`target/<profile>/name`).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps").join(name)
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// CPU seconds (user + system) a process has used, from /proc.
pub fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// CPU seconds of every PostgreSQL process.
pub fn postgres_cpu_secs() -> f64 {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres")
        })
        .map(cpu_secs)
        .sum()
}

/// A process's resident memory in bytes (0 once it is gone).
pub fn rss_bytes(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib * 1024)
}

/// Waits until `url` answers 2xx; panics after `within`.
pub async fn wait_for(url: &str, within: Duration) {
    let http = reqwest::Client::new();
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if http.get(url).send().await.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} did not come up within {within:?}");
}

/// Signs in through the login form and returns the session cookie (`name=value`).
pub async fn login(app_url: &str, username: &str, password: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{app_url}/api/auth/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("username={username}&password={password}"))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "login: {}", response.status());
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap().to_string())
        .next()
        .expect("session cookie")
}

/// p50, p95 and max of durations, in milliseconds.
pub fn percentiles(mut ms: Vec<f64>) -> (f64, f64, f64) {
    if ms.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95), ms[ms.len() - 1])
}
