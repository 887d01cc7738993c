//! `/api/v1` with tokens only: a whole pipeline against the simulator (import, endpoint, run,
//! wait, decide, export, download), the token rules (shown once, stored hashed, owner's current
//! role, revoked, expired, disabled), the run event stream with a token, and the OpenAPI
//! document against the router's routes.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::http::{header, Method, StatusCode};
use domain::Role;
use serde_json::{json, Value};
use std::time::Duration;
use support::TestApp;

async fn poll(app: &TestApp, path: &str, token: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = app.api(Method::GET, path, Some(token), None).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
        if done(&body) {
            return body;
        }
        assert!(tokio::time::Instant::now() < deadline, "{path} never got there: {body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Registers the server at `base_url` through the API.
async fn add_endpoint(app: &TestApp, token: &str, name: &str, base_url: &str) -> (StatusCode, Value) {
    app.api(Method::POST, "/api/v1/endpoints", Some(token), Some(json!({"name": name, "base_url": base_url})))
        .await
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_pipeline_runs_end_to_end_with_a_token_only(pool: sqlx::PgPool) {
    let sim = engine::testing::sim(engine::testing::fast_sim()).await;
    let roots = std::env::temp_dir().join(format!("ds-api-{}", rand::random::<u64>()));
    std::fs::create_dir_all(&roots).unwrap();
    let lines: String = (0..6)
        .map(|i| json!({"id": format!("q{i}"), "messages": [{"role": "user", "content": format!("Explain topic {i}.")}]}).to_string() + "\n")
        .collect();
    std::fs::write(roots.join("prompts.jsonl"), lines).unwrap();
    let roots_str = roots.to_string_lossy().to_string();
    let app = TestApp::with_env(pool.clone(), &[("DS_DATASET_ROOTS", &roots_str)]).await;
    let erin = app.add_user("erin", Role::Engineer).await;
    let token = app.token(erin).await;
    let (stop, worker) = engine::testing::start_worker(&pool);

    // Import from a server path and wait until ready.
    let path = roots.join("prompts.jsonl").to_string_lossy().to_string();
    let (status, body) = app
        .api(
            Method::POST,
            "/api/v1/datasets",
            Some(&token),
            Some(json!({"name": "prompts", "source": {"kind": "path", "path": path}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let dataset = body["id"].as_i64().unwrap();
    let detail =
        poll(&app, &format!("/api/v1/datasets/{dataset}"), &token, |d| d["summary"]["status"] != "importing")
            .await;
    assert_eq!(detail["summary"]["status"], "ready", "{detail}");
    let (status, rows) =
        app.api(Method::GET, &format!("/api/v1/datasets/{dataset}/rows?limit=4"), Some(&token), None).await;
    assert_eq!(status, StatusCode::OK, "{rows}");
    assert_eq!(rows["items"].as_array().unwrap().len(), 4, "{rows}");
    let after = rows["next"].as_str().expect("a second page");
    let (_, rest) = app
        .api(Method::GET, &format!("/api/v1/datasets/{dataset}/rows?after={after}"), Some(&token), None)
        .await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 2, "{rest}");
    assert!(rest["next"].is_null(), "{rest}");

    // The simulator as an endpoint.
    let (status, body) = add_endpoint(&app, &token, "sim", &sim.base_url()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let endpoint = body["id"].as_i64().unwrap();
    let (status, listed) = app.api(Method::GET, "/api/v1/endpoints", Some(&token), None).await;
    assert_eq!((status, listed["items"][0]["id"].as_i64()), (StatusCode::OK, Some(endpoint)));

    // The form's validation applies: a run without a model is refused with what to fill in.
    let (status, body) = app
        .api(
            Method::POST,
            "/api/v1/runs",
            Some(&token),
            Some(json!({"name": "r", "dataset_id": dataset, "endpoint_ids": [endpoint]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["status"], 422);
    assert!(body["error"]["message"].as_str().unwrap().contains("model"), "{body}");
    let (status, body) = app
        .api(Method::POST, "/api/v1/runs", Some(&token), Some(json!({"name": "r", "dataset_id": dataset, "endpoint_ids": [endpoint], "model": "sim-model", "max_tokenz": 5})))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("max_tokenz"), "{body}");
    // Tool settings: a wrong choice or a flag that is not true/false is named.
    for (field, value, named) in [
        ("tool_choice", json!("sometimes"), "tool choice"),
        ("parallel_tool_calls", json!("maybe"), "parallel_tool_calls"),
    ] {
        let mut run = json!({"name": "r", "dataset_id": dataset, "endpoint_ids": [endpoint], "model": engine::testing::MODEL});
        run[field] = value;
        let (status, body) = app.api(Method::POST, "/api/v1/runs", Some(&token), Some(run)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert!(body["error"]["message"].as_str().unwrap().contains(named), "{body}");
    }

    let (status, body) = app
        .api(
            Method::POST,
            "/api/v1/runs",
            Some(&token),
            Some(json!({"name": "api run", "dataset_id": dataset, "endpoint_ids": [endpoint], "model": engine::testing::MODEL, "max_tokens": 256, "idle_timeout_secs": 5,
                        "tool_choice": "required", "parallel_tool_calls": "false"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let run = body["id"].as_i64().unwrap();
    let (choice, parallel): (String, bool) = sqlx::query_as(
        "SELECT settings->>'tool_choice', (settings->>'parallel_tool_calls')::boolean FROM runs WHERE id = $1",
    )
    .bind(run)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((choice.as_str(), parallel), ("required", false), "the CLI's text `false` is read as false");
    let snapshot = poll(&app, &format!("/api/v1/runs/{run}"), &token, |r| r["status"] == "completed").await;
    let counts = &snapshot["counts"];
    let finished: i64 =
        ["ok", "truncated", "timed_out", "failed", "empty"].iter().map(|k| counts[k].as_i64().unwrap()).sum();
    assert_eq!(finished, 6, "{counts}");
    let (_, runs) = app.api(Method::GET, "/api/v1/runs", Some(&token), None).await;
    assert_eq!(runs["items"][0]["id"].as_i64(), Some(run));

    // Review one sample through the API: list with a filter, read it, approve it.
    let (status, page) = app
        .api(Method::GET, &format!("/api/v1/runs/{run}/samples?outcome=ok&limit=2"), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 2, "{page}");
    assert!(page["next"].is_string(), "more than one page: {page}");
    let sample = items[0]["id"].as_i64().unwrap();
    let (status, detail) =
        app.api(Method::GET, &format!("/api/v1/samples/{sample}"), Some(&token), None).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let version = detail["review_version"].as_i64().unwrap();
    let decide = |v: i64| json!({"version": v, "decision": "approve"});
    let (status, body) = app
        .api(Method::POST, &format!("/api/v1/samples/{sample}/decision"), Some(&token), Some(decide(version)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .api(Method::POST, &format!("/api/v1/samples/{sample}/decision"), Some(&token), Some(decide(version)))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "a stale version is refused: {body}");

    // The counts panel, and one decision for a filtered set: asked first, then confirmed.
    let (status, counts) = app
        .api(Method::GET, &format!("/api/v1/runs/{run}/samples/counts?review=unreviewed"), Some(&token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{counts}");
    assert_eq!(
        (counts["total"].as_i64(), &counts["counted"]),
        (Some(5), &json!({"kind": "exact"})),
        "{counts}"
    );
    let searched = format!("/api/v1/runs/{run}/samples/counts?q=answer&exact=");
    let (status, exact) = app.api(Method::GET, &format!("{searched}true"), Some(&token), None).await;
    assert_eq!((status, &exact["counted"]["kind"]), (StatusCode::OK, &json!("exact")), "{exact}");
    let (status, body) = app.api(Method::GET, &format!("{searched}yes"), Some(&token), None).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(error_message(&body).contains("exact must be true or false, not \"yes\""), "{body}");
    let review: Vec<(String, i64)> = counts["review"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["value"].as_str().unwrap().to_string(), v["count"].as_i64().unwrap()))
        .collect();
    assert_eq!(review, vec![("unreviewed".to_string(), 5), ("approved".to_string(), 1)], "{counts}");
    let bulk = |expected: Option<i64>| json!({"decision": "reject", "note": "checked in bulk", "expected": expected});
    let path = format!("/api/v1/runs/{run}/samples/decision?review=unreviewed");
    let (status, asked) = app.api(Method::POST, &path, Some(&token), Some(bulk(None))).await;
    assert_eq!(
        (status, asked["matched"].as_i64(), asked["changed"].as_i64()),
        (StatusCode::OK, Some(5), Some(0)),
        "{asked}"
    );
    let (status, body) = app.api(Method::POST, &path, Some(&token), Some(bulk(Some(4)))).await;
    assert_eq!(status, StatusCode::CONFLICT, "a count that no longer holds is refused: {body}");
    assert!(error_message(&body).contains("now matches 5 finished samples, not the 4"), "{body}");
    let (status, done) = app.api(Method::POST, &path, Some(&token), Some(bulk(Some(5)))).await;
    assert_eq!((status, done["changed"].as_i64()), (StatusCode::OK, Some(5)), "{done}");
    let (_, counts) =
        app.api(Method::GET, &format!("/api/v1/runs/{run}/samples/counts"), Some(&token), None).await;
    assert_eq!(counts["review"][0]["value"], "rejected", "{counts}");
    assert_eq!(counts["review"][0]["count"], 5, "{counts}");
    let (status, body) = app
        .api(
            Method::POST,
            &format!("/api/v1/runs/{run}/samples/decision?flag=nonsense_flag"),
            Some(&token),
            Some(json!({"decision": "maybe"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "an unknown decision is refused by name: {body}");

    // Export the approved sample and download it.
    let spec = json!({
        "selection": {"run_ids": [run], "outcomes": ["ok"], "review": "approved_only", "excluded_flags": [], "categories": [],
                      "min_completion_tokens": null, "max_completion_tokens": null, "duplicates": "remove", "thinking": {"mode": "any"}, "seed": 1},
        "format": serde_json::to_value(domain::export::ExportFormat::default()).unwrap(),
        "destination": {"kind": "directory", "path": "api-sets"},
    });
    let (status, body) =
        app.api(Method::POST, "/api/v1/exports", Some(&token), Some(json!({"spec": spec}))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let export = body["id"].as_i64().unwrap();
    let done = poll(&app, &format!("/api/v1/exports/{export}"), &token, |e| {
        e["status"] != "running" && e["status"] != "pending"
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    let (status, body) =
        app.api(Method::POST, &format!("/api/v1/exports/{export}/cancel"), Some(&token), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "a finished export cannot be cancelled: {body}");
    assert_eq!(done["counts"]["written"], 1, "only the approved sample: {done}");
    let (_, files) =
        app.api(Method::GET, &format!("/api/v1/exports/{export}/files"), Some(&token), None).await;
    let names: Vec<&str> =
        files["files"].as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"train.jsonl") && names.contains(&"manifest.json"), "{files}");
    let response = app
        .api_raw(Method::GET, &format!("/api/v1/exports/{export}/files/train.jsonl"), Some(&token), None)
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let train = support::body_text(response).await;
    assert_eq!(train.lines().count(), 1, "{train}");
    let row: Value = serde_json::from_str(train.lines().next().unwrap()).unwrap();
    assert!(row["conversations"].is_array(), "{row}");
    let (status, body) =
        app.api(Method::GET, &format!("/api/v1/exports/{export}/files/secret.txt"), Some(&token), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body["error"]["message"].as_str().unwrap().contains("has no file named"), "{body}");

    stop.cancel();
    worker.await.unwrap().unwrap();
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_file_uploaded_through_the_api_imports_and_an_unused_endpoint_is_removed(pool: sqlx::PgPool) {
    let app = TestApp::with_env(pool.clone(), &[("DS_UPLOAD_LIMIT", "1KiB")]).await;
    let erin = app.add_user("erin", Role::Engineer).await;
    let token = app.token(erin).await;
    let lines: String = (0..3)
        .map(|i| {
            json!({"messages": [{"role": "user", "content": format!("Upload question {i}?")}]}).to_string()
                + "\n"
        })
        .collect();

    let (status, saved) = app
        .api_bytes("/api/v1/datasets/uploads?filename=chat.jsonl", &token, lines.clone().into_bytes())
        .await;
    assert_eq!(status, StatusCode::CREATED, "{saved}");
    assert_eq!(saved["bytes"], lines.len() as u64, "{saved}");
    assert_eq!(saved["filename"], "chat.jsonl");
    // Bad uploads say what to send.
    let (status, body) = app.api_bytes("/api/v1/datasets/uploads?filename=empty.jsonl", &token, vec![]).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(error_message(&body).contains("empty"), "{body}");
    let (status, body) =
        app.api_bytes("/api/v1/datasets/uploads?filename=big.jsonl", &token, vec![b'x'; 2048]).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert!(error_message(&body).contains("DS_UPLOAD_LIMIT"), "{body}");
    let (status, body) = app.api_bytes("/api/v1/datasets/uploads", &token, lines.clone().into_bytes()).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(error_message(&body).contains("filename"), "{body}");

    let source = json!({"kind": "upload", "upload_id": saved["upload_id"], "filename": "chat.jsonl"});
    let (status, body) = app
        .api(
            Method::POST,
            "/api/v1/datasets",
            Some(&token),
            Some(json!({"name": "uploaded", "source": source})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let dataset = body["id"].as_i64().unwrap();
    let detail =
        poll(&app, &format!("/api/v1/datasets/{dataset}"), &token, |d| d["summary"]["status"] != "importing")
            .await;
    assert_eq!(detail["summary"]["status"], "ready", "{detail}");
    assert_eq!(detail["summary"]["rows_imported"], 3, "{detail}");

    let sim = engine::testing::sim(engine::testing::fast_sim()).await;
    let (status, endpoint) = add_endpoint(&app, &token, "spare", &sim.base_url()).await;
    assert_eq!(status, StatusCode::CREATED, "{endpoint}");
    let path = format!("/api/v1/endpoints/{}", endpoint["id"]);
    let (status, _) = app.api(Method::DELETE, &path, Some(&token), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, list) = app.api(Method::GET, "/api/v1/endpoints", Some(&token), None).await;
    assert!(list["items"].as_array().unwrap().iter().all(|e| e["name"] != "spare"), "{list}");
    let (status, body) = app.api(Method::DELETE, &path, Some(&token), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_token_is_shown_once_stored_hashed_and_acts_with_the_owners_current_role(pool: sqlx::PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let ann = app.add_user("ann", Role::Admin).await;
    let erin = app.add_user("erin", Role::Engineer).await;
    let created = engine::auth::tokens::create(&pool, erin, "cron", 7).await.unwrap();
    assert!(created.token.starts_with("ds_") && created.token.len() == 3 + 64, "{}", created.token);
    let stored: Vec<u8> =
        sqlx::query_scalar("SELECT token_hash FROM api_tokens").fetch_one(&pool).await.unwrap();
    assert_ne!(stored, created.token.as_bytes(), "only a hash is kept");
    let row: String =
        sqlx::query_scalar("SELECT row_to_json(t)::text FROM api_tokens t").fetch_one(&pool).await.unwrap();
    assert!(!row.contains(&created.token[3..]), "no column holds the secret: {row}");

    let (status, _) = app.api(Method::GET, "/api/v1/runs", Some(&created.token), None).await;
    assert_eq!(status, StatusCode::OK);
    let used: Option<time::OffsetDateTime> =
        sqlx::query_scalar("SELECT last_used_at FROM api_tokens").fetch_one(&pool).await.unwrap();
    assert!(used.is_some(), "a use is recorded");

    // A demoted owner's token is demoted with them.
    engine::auth::set_role(&pool, erin, Role::Reviewer).await.unwrap();
    let (status, body) = app.api(Method::GET, "/api/v1/runs", Some(&created.token), None).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("engineer"), "{body}");

    // Disabled owners' tokens stop working.
    engine::auth::set_disabled(&pool, erin, true).await.unwrap();
    let (status, _) = app.api(Method::GET, "/api/v1/samples/1", Some(&created.token), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    engine::auth::set_disabled(&pool, erin, false).await.unwrap();

    // Owners list and revoke their own; admins everyone's; others' are "not found".
    let rita = app.add_user("rita", Role::Reviewer).await;
    let ritas = engine::auth::tokens::create(&pool, rita, "notebook", 1).await.unwrap();
    let viewer = |id| {
        let pool = pool.clone();
        async move { engine::auth::find_viewer(&pool, id).await.unwrap().unwrap() }
    };
    let (ann_v, erin_v, rita_v) = (viewer(ann).await, viewer(erin).await, viewer(rita).await);
    assert_eq!(engine::auth::tokens::list(&pool, &rita_v).await.unwrap().len(), 1);
    assert_eq!(engine::auth::tokens::list(&pool, &ann_v).await.unwrap().len(), 2);
    assert!(matches!(
        engine::auth::tokens::revoke(&pool, &erin_v, ritas.summary.id).await,
        Err(engine::Error::NotFound(_))
    ));
    engine::auth::tokens::revoke(&pool, &ann_v, ritas.summary.id).await.unwrap();
    let (status, _) = app.api(Method::GET, "/api/v1/samples/1", Some(&ritas.token), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let listed = engine::auth::tokens::list(&pool, &rita_v).await.unwrap();
    assert!(listed[0].revoked_at.is_some() && !listed[0].is_active(time::OffsetDateTime::now_utc()));

    // Names and lifetimes are checked, with what to change.
    for (name, days) in [("", 7), ("x", 0), ("x", 366)] {
        let error = engine::auth::tokens::create(&pool, erin, name, days).await.unwrap_err();
        assert!(matches!(error, engine::Error::Invalid(_)), "{name:?} {days}: {error}");
    }
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn the_run_event_stream_takes_a_token(pool: sqlx::PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let erin = app.add_user("erin", Role::Engineer).await;
    let rita = app.add_user("rita", Role::Reviewer).await;
    let dataset = engine::testing::dataset(&pool, 2).await;
    let sim = engine::testing::sim(engine::testing::fast_sim()).await;
    let endpoint = engine::testing::endpoint(&pool, &sim, erin).await;
    let run =
        engine::testing::create_run(&pool, dataset, engine::testing::settings(vec![endpoint]), erin).await;
    let token = app.token(erin).await;
    for path in [format!("/api/runs/{run}/events"), format!("/api/v1/runs/{run}/events")] {
        let response = app.api_raw(Method::GET, &path, Some(&token), None).await;
        assert_eq!(response.status(), StatusCode::OK, "{path}");
        assert_eq!(response.headers()[header::CONTENT_TYPE], "text/event-stream", "{path}");
        let response = app.api_raw(Method::GET, &path, Some("ds_not-a-token"), None).await;
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{path}");
        let reviewer = app.token(rita).await;
        let response = app.api_raw(Method::GET, &path, Some(&reviewer), None).await;
        assert_eq!(response.status(), StatusCode::FORBIDDEN, "{path}");
    }
    // A token reaches no other session route: it cannot mint tokens or read the Users page.
    let response = app.api_raw(Method::POST, "/api/tokens/list", Some(&token), None).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
}

/// Every `/api/v1` route with the role it needs, as the pages' server functions require it.
const ROUTES: &[(&str, &str, Role)] = &[
    ("GET", "/api/v1/runs", Role::Engineer),
    ("POST", "/api/v1/runs", Role::Engineer),
    ("GET", "/api/v1/runs/{id}", Role::Engineer),
    ("POST", "/api/v1/runs/{id}/pause", Role::Engineer),
    ("POST", "/api/v1/runs/{id}/resume", Role::Engineer),
    ("POST", "/api/v1/runs/{id}/cancel", Role::Engineer),
    ("POST", "/api/v1/runs/{id}/retry", Role::Engineer),
    ("GET", "/api/v1/runs/{id}/events", Role::Engineer),
    ("GET", "/api/v1/runs/{id}/samples", Role::Reviewer),
    ("GET", "/api/v1/runs/{id}/samples/counts", Role::Reviewer),
    ("POST", "/api/v1/runs/{id}/samples/decision", Role::Engineer),
    ("GET", "/api/v1/samples/{id}", Role::Reviewer),
    ("POST", "/api/v1/samples/{id}/decision", Role::Reviewer),
    ("GET", "/api/v1/exports", Role::Engineer),
    ("POST", "/api/v1/exports", Role::Engineer),
    ("GET", "/api/v1/exports/{id}", Role::Engineer),
    ("POST", "/api/v1/exports/{id}/cancel", Role::Engineer),
    ("GET", "/api/v1/exports/{id}/files", Role::Engineer),
    ("GET", "/api/v1/exports/{id}/files/{name}", Role::Engineer),
    ("GET", "/api/v1/endpoints", Role::Engineer),
    ("POST", "/api/v1/endpoints", Role::Engineer),
    ("DELETE", "/api/v1/endpoints/{id}", Role::Engineer),
    ("POST", "/api/v1/endpoints/{id}/check", Role::Engineer),
    ("GET", "/api/v1/datasets", Role::Engineer),
    ("POST", "/api/v1/datasets", Role::Engineer),
    ("POST", "/api/v1/datasets/uploads", Role::Engineer),
    ("GET", "/api/v1/datasets/{id}", Role::Engineer),
    ("GET", "/api/v1/datasets/{id}/rows", Role::Engineer),
    ("GET", "/api/v1/runs/{id}/acceptance", Role::Engineer),
    ("GET", "/api/v1/evaluations", Role::Engineer),
    ("GET", "/api/v1/acceptance/compare", Role::Engineer),
    ("GET", "/api/v1/acceptance/loop", Role::Engineer),
    ("GET", "/api/v1/drafts", Role::Engineer),
    ("POST", "/api/v1/drafts", Role::Engineer),
    ("GET", "/api/v1/exports/{id}/drafts", Role::Engineer),
    ("GET", "/api/v1/datasets/{id}/quotas", Role::Engineer),
];

fn concrete(template: &str) -> String {
    template.replace("{id}", "1").replace("{name}", "train.jsonl")
}

fn error_message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or("")
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn every_api_route_is_guarded_for_every_role_and_token_state(pool: sqlx::PgPool) {
    let app = TestApp::new(pool.clone()).await;
    let mut callers: Vec<(String, Option<String>, Option<Role>)> = vec![("no token".into(), None, None)];
    for role in Role::ALL {
        let id = app.add_user(role.as_str(), role).await;
        callers.push((role.as_str().into(), Some(app.token(id).await), Some(role)));
    }
    let admin_id: i64 =
        sqlx::query_scalar("SELECT id FROM users WHERE role = 'admin'").fetch_one(&pool).await.unwrap();
    let revoked = engine::auth::tokens::create(&pool, admin_id, "revoked", 30).await.unwrap();
    let admin_viewer = engine::auth::find_viewer(&pool, admin_id).await.unwrap().unwrap();
    engine::auth::tokens::revoke(&pool, &admin_viewer, revoked.summary.id).await.unwrap();
    let expired = engine::auth::tokens::create(&pool, admin_id, "expired", 30).await.unwrap();
    sqlx::query("UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(expired.summary.id)
        .execute(&pool)
        .await
        .unwrap();
    callers.push(("revoked admin token".into(), Some(revoked.token), None));
    callers.push(("expired admin token".into(), Some(expired.token), None));
    callers.push(("a made-up token".into(), Some(format!("ds_{}", "0".repeat(64))), None));

    for (method, template, needed) in ROUTES {
        let path = concrete(template);
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        for (who, token, role) in &callers {
            let (status, body) = app.api(method.clone(), &path, token.as_deref(), None).await;
            match role {
                None => {
                    assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {path} with {who}: {body}");
                    assert_eq!(body["error"]["status"], 401, "{method} {path} with {who}: {body}");
                    assert!(error_message(&body).contains("/tokens"), "says where to get a token: {body}");
                }
                Some(role) if role.allows(*needed) => {
                    assert!(
                        status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                        "{method} {path} as {who}: {status} {body}"
                    );
                    assert!(
                        !error_message(&body).contains("is not an API route"),
                        "{method} {path} is routed: {body}"
                    );
                }
                Some(_) => {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path} as {who}: {body}");
                    assert_eq!(body["error"]["status"], 403);
                    assert!(error_message(&body).contains(needed.as_str()), "names the role: {body}");
                }
            }
        }
    }
    // A session cookie is not a token.
    let cookie = app.login("admin").await;
    let response = app.get("/api/v1/runs", Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::UNAUTHORIZED);
    // An unknown route answers in the same shape, pointing at the list of routes.
    let (status, body) = app.api(Method::GET, "/api/v1/nothing", None, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_message(&body).contains("/api/v1/docs"), "{body}");
}

/// The routes `server::api::routes` declares, read from its source: `(METHOD, path)`.
fn router_routes() -> Vec<(String, String)> {
    let source = include_str!("../src/api/mod.rs");
    let mut routes = Vec::new();
    for line in source.lines().map(str::trim).filter(|l| l.starts_with(".route(\"/")) {
        let path = format!("{}{}", server::api::PREFIX, line.split('"').nth(1).unwrap());
        if path == server::api::openapi::DOCUMENT_PATH || path == server::api::openapi::PAGE_PATH {
            continue; // public, describe the others
        }
        for method in ["get", "post", "put", "patch", "delete"] {
            if line.contains(&format!("{method}(")) {
                routes.push((method.to_uppercase(), path.clone()));
            }
        }
    }
    routes.sort();
    routes
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn the_openapi_document_lists_every_route_and_is_served(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let (status, doc) = app.api(Method::GET, server::api::openapi::DOCUMENT_PATH, None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0", "{}", doc["openapi"]);
    assert_eq!(doc["components"]["securitySchemes"]["bearer"]["scheme"], "bearer");
    let mut documented: Vec<(String, String)> = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            documented.push((method.to_uppercase(), path.clone()));
            assert!(
                op["responses"].as_object().is_some_and(|r| !r.is_empty()),
                "{method} {path} has responses"
            );
            if !path.ends_with("/events") && method == "get" && path.contains('{') {
                assert!(op["parameters"].is_array(), "{method} {path} documents its parameters");
            }
        }
    }
    documented.sort();
    let mut walked: Vec<(String, String)> =
        ROUTES.iter().map(|(m, p, _)| (m.to_string(), p.to_string())).collect();
    walked.sort();
    assert_eq!(documented, router_routes(), "the document and the router list the same routes");
    assert_eq!(walked, router_routes(), "the authorization walk covers every route");
    // Every schema a route refers to is defined.
    let text = doc.to_string();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = reference.split('"').next().unwrap();
        assert!(doc["components"]["schemas"][name].is_object(), "schema {name} is defined");
    }
    let response = app.get(server::api::openapi::PAGE_PATH, None).await;
    assert_eq!(response.status(), StatusCode::OK);
    let page = support::body_text(response).await;
    for (method, path) in router_routes() {
        assert!(
            page.contains(&format!("<td class=\"method\">{method}</td><td><code>{path}</code>")),
            "{method} {path} on the page"
        );
    }
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn the_tokens_page_makes_lists_and_revokes_tokens_for_a_signed_in_account(pool: sqlx::PgPool) {
    let app = TestApp::new(pool.clone()).await;
    app.add_user("rita", Role::Reviewer).await;
    let cookie = app.login("rita").await;
    let response = app.post("/api/tokens/create", Some(&cookie), "name=notebook&days=7").await;
    assert_eq!(response.status(), StatusCode::OK);
    let created: Value = serde_json::from_str(&support::body_text(response).await).unwrap();
    let token = created["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("ds_"), "{created}");
    // The token works on the API with rita's role.
    let (status, _) = app.api(Method::GET, "/api/v1/samples/1", Some(&token), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "a reviewer may read samples; there is none");
    let page = support::body_text(app.get("/tokens", Some(&cookie)).await).await;
    assert!(page.contains("data-testid=\"tokens-table\"") && page.contains("notebook"), "{page}");
    assert!(!page.contains(&token), "the plaintext is never shown again");
    let response = app.post("/api/tokens/create", Some(&cookie), "name=x&days=1000").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let id = created["summary"]["id"].as_i64().unwrap();
    let response = app.post("/api/tokens/revoke", Some(&cookie), &format!("id={id}")).await;
    assert_eq!(response.status(), StatusCode::OK);
    let (status, _) = app.api(Method::GET, "/api/v1/samples/1", Some(&token), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}
