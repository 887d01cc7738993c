//! The export download route: an engineer gets a completed folder export's files byte for byte;
//! names outside the manifest (traversal included), other roles, S3 and unfinished exports are
//! refused with a message that says why.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::http::{header, StatusCode};
use domain::export::*;
use domain::Role;
use engine::export::{job, store, S3Options, Storage};
use engine::testing::{finished_run, SeedSample};
use http_body_util::BodyExt;
use std::path::PathBuf;
use support::{body_text, TestApp};

fn spec(run: i64, destination: Destination) -> ExportSpec {
    ExportSpec {
        selection: ExportSelection::for_runs(vec![run]),
        format: ExportFormat::default(),
        destination,
    }
}

async fn seeded_run(app: &TestApp) -> i64 {
    finished_run(
        &app.pool,
        &[
            SeedSample::answered("What is 6 times 7?", "Six sevens are forty-two.", "The answer is 42."),
            SeedSample::answered("What is the capital of France?", "", "Paris."),
        ],
    )
    .await
}

/// A completed folder export under the app's storage root; returns its id and folder.
async fn completed_export(app: &TestApp) -> (i64, PathBuf) {
    let run = seeded_run(app).await;
    let storage = Storage::new(app.config.export_roots.clone(), S3Options::default());
    let spec = spec(run, Destination::Directory { path: "sets".into() });
    let id = job::create(&app.pool, &spec, None, None).await.unwrap();
    let status = job::run(&app.pool, &storage, id).await.unwrap();
    let record = store::get(&app.pool, id).await.unwrap();
    assert_eq!(status, ExportStatus::Completed, "{:?}", record.error);
    (id, PathBuf::from(record.location.unwrap()))
}

async fn engineer(app: &TestApp) -> String {
    app.add_user("erin", Role::Engineer).await;
    app.login("erin").await
}

fn url(id: i64, name: &str) -> String {
    format!("/api/exports/{id}/files/{name}")
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn an_engineer_downloads_each_file_byte_for_byte(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let cookie = engineer(&app).await;
    let (id, folder) = completed_export(&app).await;

    for name in ["train.jsonl", "manifest.json"] {
        let response = app.get(&url(id, name), Some(&cookie)).await;
        assert_eq!(response.status(), StatusCode::OK, "{name}");
        let on_disk = std::fs::read(folder.join(name)).unwrap();
        let headers = response.headers().clone();
        assert_eq!(headers[header::CONTENT_LENGTH].to_str().unwrap(), on_disk.len().to_string(), "{name}");
        assert_eq!(
            headers[header::CONTENT_DISPOSITION].to_str().unwrap(),
            format!("attachment; filename=\"export-{id}-{name}\"")
        );
        let body = response.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(body.as_ref(), on_disk.as_slice(), "{name} streams as written");
    }
    let train = std::fs::read_to_string(folder.join("train.jsonl")).unwrap();
    assert!(train.contains("The answer is 42.") && train.contains("Paris."), "{train}");

    // A browser asking for gzip still gets the file as stored, with its length.
    use tower::ServiceExt;
    let request = axum::http::Request::get(url(id, "train.jsonl"))
        .header(header::COOKIE, &cookie)
        .header(header::ACCEPT_ENCODING, "gzip")
        .body(axum::body::Body::empty())
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    assert_eq!(response.headers()[header::CONTENT_LENGTH].to_str().unwrap(), train.len().to_string());
    assert_ne!(response.headers().get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()), Some("gzip"));
    assert_eq!(body_text(response).await, train);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn names_outside_the_manifest_are_refused(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let cookie = engineer(&app).await;
    let (id, folder) = completed_export(&app).await;
    // Files that exist but are not the export's: one beside its data, one beside its folder.
    std::fs::write(folder.join("notes.txt"), "not part of the export").unwrap();
    std::fs::write(folder.parent().unwrap().join("secret.txt"), "outside the export").unwrap();

    for name in [
        "notes.txt",
        "..%2Fsecret.txt",
        "%2E%2E%2Fsecret.txt",
        "..",
        "..%2F..%2F..%2F..%2F..%2Fetc%2Fpasswd",
        "%2Fetc%2Fpasswd",
        "train.jsonl%2F..%2F..%2Fsecret.txt",
        "TRAIN.JSONL",
    ] {
        let response = app.get(&url(id, name), Some(&cookie)).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{name}");
        let body = body_text(response).await;
        assert!(body.contains(&format!("export {id} has no file named")), "{name}: {body}");
        assert!(body.contains("train.jsonl, manifest.json"), "the message lists the files: {body}");
        assert!(!body.contains("outside the export") && !body.contains("root:"), "{name}: {body}");
    }
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn only_engineers_and_admins_may_download(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let (id, _) = completed_export(&app).await;
    app.add_user("rita", Role::Reviewer).await;
    app.add_user("ada", Role::Admin).await;
    let reviewer = app.login("rita").await;
    let admin = app.login("ada").await;

    let anonymous = app.get(&url(id, "train.jsonl"), None).await;
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let refused = app.get(&url(id, "train.jsonl"), Some(&reviewer)).await;
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let body = body_text(refused).await;
    assert!(!body.contains("answer"), "no data in the refusal: {body}");
    assert_eq!(app.get(&url(id, "train.jsonl"), Some(&admin)).await.status(), StatusCode::OK);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn s3_unfinished_and_unknown_exports_have_no_download(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let cookie = engineer(&app).await;
    let run = seeded_run(&app).await;

    let s3 = spec(run, Destination::S3 { bucket: "training".into(), prefix: "eagle3".into() });
    let to_s3 = job::create(&app.pool, &s3, None, None).await.unwrap();
    sqlx::query("UPDATE exports SET status = 'completed', finished_at = now(), location = $2 WHERE id = $1")
        .bind(to_s3)
        .bind(format!("s3://training/eagle3/export-{to_s3}"))
        .execute(&app.pool)
        .await
        .unwrap();
    let response = app.get(&url(to_s3, "train.jsonl"), Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body = body_text(response).await;
    assert!(body.contains("was written to S3 (s3://training/eagle3/"), "{body}");

    let running =
        job::create(&app.pool, &spec(run, Destination::Directory { path: "sets".into() }), None, None)
            .await
            .unwrap();
    let response = app.get(&url(running, "train.jsonl"), Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body = body_text(response).await;
    let unfinished = [format!("export {running} is queued"), format!("export {running} is running")];
    assert!(unfinished.iter().any(|m| body.contains(m.as_str())), "{body}");

    let response = app.get(&url(987_654, "train.jsonl"), Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(body_text(response).await, "there is no export 987654");
}

/// Calls an `exports/` server function with a JSON body, as the page does.
async fn call(app: &TestApp, cookie: &str, name: &str, body: serde_json::Value) -> (StatusCode, String) {
    use tower::ServiceExt;
    let request = axum::http::Request::post(format!("/api/exports/{name}"))
        .header(header::COOKIE, cookie)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::ACCEPT, "application/json")
        .body(axum::body::Body::from(body.to_string()))
        .unwrap();
    let response = app.router.clone().oneshot(request).await.unwrap();
    let status = response.status();
    (status, body_text(response).await)
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_saved_preset_exports_in_one_call_and_lists_its_files(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let cookie = engineer(&app).await;
    let run = seeded_run(&app).await;
    let spec = serde_json::to_value(spec(run, Destination::Directory { path: "one-click".into() })).unwrap();

    let (status, body) = call(&app, &cookie, "preview", serde_json::json!({ "spec": spec })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let preview: ExportPreview = serde_json::from_str(&body).unwrap();
    assert_eq!((preview.matched, preview.selected), (2, 2));

    let (status, body) =
        call(&app, &cookie, "save_preset", serde_json::json!({ "name": "nightly", "spec": spec })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let preset: i64 = body.parse().unwrap();
    let (status, body) = call(&app, &cookie, "presets", serde_json::json!({})).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let presets: Vec<app::exports::api::PresetItem> = serde_json::from_str(&body).unwrap();
    assert_eq!(presets.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(), ["nightly"]);

    let (status, body) =
        call(&app, &cookie, "start_preset", serde_json::json!({ "preset_id": preset })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let export: i64 = body.parse().unwrap();

    let mut item = None;
    for _ in 0..100 {
        let (status, body) = call(&app, &cookie, "list", serde_json::json!({})).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let list: Vec<app::exports::api::ExportItem> = serde_json::from_str(&body).unwrap();
        let found = list.into_iter().find(|e| e.id == export).expect("the export is listed");
        if !matches!(found.status, ExportStatus::Running | ExportStatus::Queued) {
            item = Some(found);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let item = item.expect("the export finishes");
    assert_eq!(item.status, ExportStatus::Completed, "{:?}", item.error);
    assert_eq!(item.preset_name.as_deref(), Some("nightly"));
    assert_eq!(item.counts.as_ref().map(|c| c.written), Some(2));
    assert_eq!(item.rows_done, 2);
    let names: Vec<&str> = item.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["train.jsonl", "manifest.json"]);
    assert_eq!(item.files.iter().map(|f| f.bytes as i64).sum::<i64>(), item.bytes.unwrap());

    let response = app.get(&app::exports::api::download_url(export, "train.jsonl"), Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body_text(response).await.contains("Paris."));

    // Cancelling a finished export says so; an empty preset name says what to do.
    let (status, body) = call(&app, &cookie, "cancel", serde_json::json!({ "id": export })).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body.contains("no longer running"), "{body}");
    let (status, body) =
        call(&app, &cookie, "save_preset", serde_json::json!({ "name": " ", "spec": spec })).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body.contains("give the preset a name"), "{body}");
}
