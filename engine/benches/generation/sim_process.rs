//! The simulator as a separate process, so its CPU is not counted as the client's.

use std::{
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::Duration,
};

pub struct SimProcess {
    child: Child,
    pub base_url: String,
}

impl SimProcess {
    pub async fn start(args: &[&str]) -> Self {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(binary())
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
        let _ = child.kill();
        let _ = child.wait();
        panic!("vllm-sim did not come up");
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
