//! The simulator as a separate process, so its CPU is not counted as the client's.

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio_util::sync::CancellationToken;

pub struct SimProcess {
    child: Child,
    pub base_url: String,
}

impl SimProcess {
    pub async fn start(args: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(binary())
            .args(["--port", &port.to_string()])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("vllm-sim starts: build it first with `cargo build -p vllm-sim` in the profile of this benchmark");
        let base_url = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        for _ in 0..100 {
            if http.get(format!("{base_url}/health")).send().await.is_ok_and(|r| r.status().is_success()) {
                return Self { child, base_url };
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("vllm-sim did not come up");
    }

    pub async fn stats(&self) -> serde_json::Value {
        reqwest::get(format!("{}/sim/stats", self.base_url)).await.unwrap().json().await.unwrap()
    }

    /// Reads the simulator's counters every 25 ms until the recording is finished.
    pub fn record(&self) -> Recording {
        let readings: Arc<Mutex<Vec<Reading>>> = Arc::default();
        let stop = CancellationToken::new();
        let (url, into, until) = (format!("{}/sim/stats", self.base_url), readings.clone(), stop.clone());
        tokio::spawn(async move {
            let http = reqwest::Client::new();
            while !until.is_cancelled() {
                if let Ok(stats) = http.get(&url).send().await {
                    if let Ok(stats) = stats.json::<serde_json::Value>().await {
                        into.lock().unwrap().push(Reading {
                            at: epoch_now(),
                            generated: stats["generation_tokens"].as_f64().unwrap_or(0.0),
                            running: stats["running"].as_f64().unwrap_or(0.0),
                        });
                    }
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        });
        Recording { readings, stop }
    }
}

/// One read of the simulator's counters, at wall-clock seconds since the epoch.
#[derive(Clone, Copy, Debug)]
pub struct Reading {
    pub at: f64,
    /// Tokens generated since start, for any request.
    pub generated: f64,
    pub running: f64,
}

pub struct Recording {
    readings: Arc<Mutex<Vec<Reading>>>,
    stop: CancellationToken,
}

impl Recording {
    pub fn finish(self) -> Vec<Reading> {
        self.stop.cancel();
        std::mem::take(&mut *self.readings.lock().unwrap())
    }
}

pub fn epoch_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `vllm-sim` next to this benchmark's own build output (target/<profile>).
fn binary() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(|deps| deps.parent()).expect("target/<profile>/deps");
    profile_dir.join("vllm-sim")
}
