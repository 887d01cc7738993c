//! The run event stream: guarded like the `runs` server functions, a snapshot as its first
//! event, and 404 for a run that does not exist.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::http::{header, StatusCode};
use domain::Role;
use http_body_util::BodyExt;
use std::time::Duration;
use support::TestApp;

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn the_event_stream_sends_snapshots_to_engineers_only(pool: sqlx::PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let engineer = app.add_user("eve", Role::Engineer).await;
    app.add_user("rita", Role::Reviewer).await;
    let sim = engine::testing::sim(engine::testing::fast_sim()).await;
    let endpoint = engine::testing::endpoint(&pool, &sim, engineer).await;
    let dataset = engine::testing::dataset(&pool, 3).await;
    let run =
        engine::testing::create_run(&pool, dataset, engine::testing::settings(vec![endpoint]), engineer)
            .await;
    let path = format!("/api/runs/{run}/events");

    assert_eq!(app.get(&path, None).await.status(), StatusCode::UNAUTHORIZED);
    let rita = app.login("rita").await;
    assert_eq!(app.get(&path, Some(&rita)).await.status(), StatusCode::FORBIDDEN);

    let eve = app.login("eve").await;
    assert_eq!(app.get("/api/runs/999999/events", Some(&eve)).await.status(), StatusCode::NOT_FOUND);
    let response = app.get(&path, Some(&eve)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = response.into_body();
    let mut text = String::new();
    tokio::time::timeout(Duration::from_secs(5), async {
        while !text.contains("\n\n") {
            let frame = body.frame().await.expect("the stream stays open").unwrap();
            if let Ok(data) = frame.into_data() {
                text.push_str(std::str::from_utf8(&data).unwrap());
            }
        }
    })
    .await
    .expect("a snapshot within a second or two");
    assert!(text.starts_with("event: snapshot\ndata: {"), "{text}");
    let json = text.trim_end().split_once("data: ").unwrap().1;
    let snapshot: domain::dashboard::RunSnapshot = serde_json::from_str(json).unwrap();
    assert_eq!(snapshot.id, run);
    assert_eq!(snapshot.counts.total(), 3);
}
