//! The upload route: a multipart upload is stored and can be imported; one over the limit is
//! refused with a message naming the limit.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::{
    body::Body,
    http::{header, Request, StatusCode},
};
use domain::{dataset::Uploaded, Role};
use http_body_util::BodyExt;
use support::TestApp;
use tower::ServiceExt;

fn multipart(filename: &str, content: &[u8]) -> (String, Vec<u8>) {
    let boundary = "ds-test-boundary";
    let mut body = format!(
        "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
    )
    .into_bytes();
    body.extend_from_slice(content);
    body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

async fn upload(app: &TestApp, cookie: &str, filename: &str, content: &[u8]) -> (StatusCode, String) {
    let (content_type, body) = multipart(filename, content);
    let request = Request::post(server::uploads::PATH)
        .header(header::COOKIE, cookie)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from(body))
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn an_engineer_uploads_a_file_within_the_limit(pool: sqlx::PgPool) {
    let app = TestApp::with_env(pool.clone(), &[("DS_UPLOAD_LIMIT", "64KiB")]).await;
    app.add_user("erin", Role::Engineer).await;
    let cookie = app.login("erin").await;

    let content = b"{\"prompt\": \"What is a draft model?\"}\n{\"prompt\": \"Why stream?\"}\n";
    let (status, body) = upload(&app, &cookie, "questions.jsonl", content).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let uploaded: Uploaded = serde_json::from_str(&body).unwrap();
    assert_eq!((uploaded.filename.as_str(), uploaded.bytes), ("questions.jsonl", content.len() as u64));

    let settings = app.config.dataset_settings();
    let started = engine::datasets::import::start(
        &pool,
        &reqwest::Client::new(),
        &settings,
        engine::datasets::import::NewImport {
            name: "uploaded".into(),
            source: domain::dataset::SourceSpec::Upload {
                upload_id: uploaded.upload_id,
                filename: uploaded.filename,
            },
            mapping: None,
            created_by: None,
        },
    )
    .await
    .unwrap();
    started.job.await.unwrap();
    let summary = engine::datasets::store::summary(&pool, started.id).await.unwrap();
    assert_eq!(summary.rows_imported, 2);

    let big = vec![b'x'; 100 << 10];
    let (status, body) = upload(&app, &cookie, "big.jsonl", &big).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(body.contains("larger than the upload limit of 64 KiB (DS_UPLOAD_LIMIT)"), "{body}");
}
