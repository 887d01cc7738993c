//! Health, metrics, and graceful shutdown of the real binary.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::http::StatusCode;
use std::{process::Stdio, time::Duration};
use support::{body_text, TestApp};

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn healthz_reports_the_database(pool: sqlx::PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let up = app.get("/healthz", None).await;
    assert_eq!(up.status(), StatusCode::OK);
    assert!(body_text(up).await.contains("\"database\":\"ok\""));
    pool.close().await;
    let down = app.get("/healthz", None).await;
    assert_eq!(down.status(), StatusCode::SERVICE_UNAVAILABLE);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn metrics_count_requests_by_route_template(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.get("/login", None).await;
    app.get("/login", None).await;
    let text = body_text(app.get("/metrics", None).await).await;
    assert!(
        text.contains(r#"draft_studio_http_requests_total{method="GET",route="/login",status="200"} 2"#),
        "{text}"
    );
    assert!(text.contains("draft_studio_http_request_duration_seconds_bucket"), "{text}");
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn sigterm_stops_the_server_cleanly(
    _options: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    let database = connect.get_database().expect("per-test database").to_string();
    let server_url = std::env::var("DATABASE_URL").unwrap();
    let database_url = format!("{}/{database}", server_url.rsplit_once('/').unwrap().0);
    let port = free_port();
    let data_dir = std::env::temp_dir().join(format!("ds-shutdown-{port}"));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_draft-studio"))
        .arg("serve")
        .env("DATABASE_URL", &database_url)
        .env("DS_BIND", format!("127.0.0.1:{port}"))
        .env("DS_DATA_DIR", &data_dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let health = format!("http://127.0.0.1:{port}/healthz");
    let mut up = false;
    for _ in 0..100 {
        if reqwest::get(&health).await.is_ok_and(|r| r.status().is_success()) {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "server did not become healthy");
    let pid = child.id().unwrap() as i32;
    // SAFETY: sending a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("server stopped within 15 s")
        .unwrap();
    assert!(status.success(), "exit status {status}");
    let output = child.wait_with_output().await.unwrap();
    let log = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    assert!(log.contains("SIGTERM received"), "{log}");
    assert!(log.contains("stopped"), "{log}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}
