//! Dataset imports: every format with every schema, bad rows, refused sources, the hub through
//! a fake hub served by the test, duplicates and cancellation.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use axum::{
    extract::{Path as UrlPath, State},
    http::{HeaderMap, StatusCode},
    response::IntoResponse,
    routing::get,
    Json, Router,
};
use domain::dataset::{DatasetStatus, Format, Mapping, Schema, SourceSpec};
use engine::{
    dataset_files::*,
    datasets::{import, jobs, sources, store, uploads, DatasetSettings},
};
use serde_json::{json, Value};
use sqlx::PgPool;
use std::{path::Path, sync::Arc, time::Duration};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

struct Env {
    dir: tempfile::TempDir,
    settings: DatasetSettings,
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("datasets");
    std::fs::create_dir_all(&root).unwrap();
    let settings = DatasetSettings {
        roots: vec![root],
        files_dir: dir.path().join("files"),
        upload_limit: 1 << 20,
        hub_endpoint: url::Url::parse("http://127.0.0.1:9").unwrap(),
        max_row_bytes: 4096,
        jobs: Default::default(),
    };
    Env { dir, settings }
}

impl Env {
    fn root(&self) -> std::path::PathBuf {
        self.settings.roots[0].clone()
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

/// A record of the schema, numbered `i`, with an id and a category column.
fn record(schema: Schema, i: usize) -> Value {
    let question = format!("How do I tune parameter {i} of the scheduler?");
    let answer = format!("Start from the default and change parameter {i} in small steps.");
    let category = if i.is_multiple_of(3) { "ops" } else { "code" };
    match schema {
        Schema::Sharegpt => json!({"id": format!("s{i}"), "category": category, "conversations": [
            {"from": "system", "value": "You are terse."},
            {"from": "human", "value": question}, {"from": "gpt", "value": answer}]}),
        Schema::Openai => json!({"id": format!("s{i}"), "category": category, "messages": [
            {"role": "user", "content": question}, {"role": "assistant", "content": answer}]}),
        Schema::Alpaca => json!({"id": format!("s{i}"), "category": category,
            "instruction": question, "input": if i.is_multiple_of(2) { "on Linux" } else { "" }, "output": answer}),
        Schema::Prompt => json!({"id": format!("s{i}"), "category": category, "question": question}),
    }
}

fn write(format: Format, path: &Path, records: Vec<Value>) {
    match format {
        Format::Jsonl => write_jsonl(path, records).unwrap(),
        Format::JsonlGz => write_jsonl_gz(path, records).unwrap(),
        Format::Json => write_json_array(path, records).unwrap(),
        Format::Parquet => write_parquet(path, records).unwrap(),
    }
}

fn extension(format: Format) -> &'static str {
    match format {
        Format::Jsonl => "jsonl",
        Format::JsonlGz => "jsonl.gz",
        Format::Json => "json",
        Format::Parquet => "parquet",
    }
}

async fn import_path(
    pool: &PgPool,
    env: &Env,
    name: &str,
    path: &Path,
    mapping: Option<Mapping>,
) -> engine::Result<i64> {
    let started = import::start(
        pool,
        &http(),
        &env.settings,
        import::NewImport {
            name: name.into(),
            source: SourceSpec::Path { path: path.display().to_string() },
            mapping,
            created_by: None,
        },
    )
    .await?;
    started.job.await.unwrap();
    Ok(started.id)
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn every_format_with_every_schema_imports(pool: PgPool) {
    let env = env();
    for schema in Schema::ALL {
        for format in Format::ALL {
            let path = env.root().join(format!("{schema}.{}", extension(format)));
            write(format, &path, (0..30).map(|i| record(schema, i)).collect());
            let name = format!("{schema}-{format}");
            let id =
                import_path(&pool, &env, &name, &path, None).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            let d = store::detail(&pool, id).await.unwrap();
            let s = &d.summary;
            assert_eq!(s.status, DatasetStatus::Ready, "{name}: {:?} {:?}", s.error, d.rejections);
            assert_eq!((s.rows_imported, s.rows_rejected, s.rows_duplicate), (30, 0, 0), "{name}");
            assert_eq!(s.format, format.as_str(), "{name}");
            assert_eq!(s.mapping.schema, schema, "{name}");
            assert_eq!(s.mapping.id_column.as_deref(), Some("id"), "{name}");
            let stats = d.stats.expect("stats");
            assert_eq!(stats.categories, vec![("code".to_string(), 20), ("ops".to_string(), 10)], "{name}");
            assert_eq!(stats.turns.iter().map(|b| b.rows).sum::<i64>(), 30);
            let page = store::rows(&pool, id, None, Some("parameter 7 "), 50).await.unwrap();
            assert_eq!(page.rows.len(), 1, "{name}: search finds one row");
            let row = &page.rows[0];
            assert_eq!(row.row_key, "s7");
            assert!(row.messages.iter().find(|m| m.role == "user").unwrap().content.starts_with("How do I"));
            if schema == Schema::Sharegpt {
                let roles: Vec<_> = row.messages.iter().map(|m| m.role.as_str()).collect();
                assert_eq!(roles, ["system", "user", "assistant"]);
            }
        }
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn bad_rows_are_counted_and_listed_and_good_rows_land(pool: PgPool) {
    let env = env();
    let path = env.root().join("mixed.jsonl");
    let good = |i: usize| serde_json::to_vec(&record(Schema::Sharegpt, i)).unwrap();
    let mut bytes: Vec<u8> = Vec::new();
    let mut line = |content: Vec<u8>| {
        bytes.extend_from_slice(&content);
        bytes.push(b'\n');
    };
    line(good(1)); // line 1
    line(b"{\"conversations\": [".to_vec()); // 2: malformed JSON
    line(br#"{"id": "x3", "category": "ops"}"#.to_vec()); // 3: missing field
    line(br#"{"id": "x4", "conversations": "hello"}"#.to_vec()); // 4: wrong type
    line(br#"{"id": "x5", "conversations": []}"#.to_vec()); // 5: empty conversation
    let mut invalid = br#"{"id": "x6", "conversations": [{"from": "human", "value": "caf"#.to_vec();
    invalid.extend_from_slice(&[0xC3, 0x28]);
    invalid.extend_from_slice(br#""}]}"#);
    line(invalid); // 6: invalid UTF-8
    let huge = "x".repeat(5000);
    line(
        serde_json::to_vec(&json!({"id": "x7", "conversations": [{"from": "human", "value": huge}]}))
            .unwrap(),
    ); // 7: over size
    line(good(2)); // 8
    line(good(1)); // 9: duplicate of line 1
    line(b"[1, 2]".to_vec()); // 10: not an object
    line(good(3)); // 11
    std::fs::write(&path, &bytes).unwrap();

    let id = import_path(&pool, &env, "mixed", &path, None).await.unwrap();
    let d = store::detail(&pool, id).await.unwrap();
    assert_eq!(d.summary.status, DatasetStatus::Ready);
    assert_eq!((d.summary.rows_imported, d.summary.rows_duplicate, d.summary.rows_rejected), (3, 1, 7));
    let listed: Vec<(String, String)> =
        d.rejections.iter().map(|r| (r.location.clone(), r.reason.clone())).collect();
    let expect = [
        ("line 2", "malformed JSON"),
        ("line 3", "the column `conversations` is missing"),
        ("line 4", "`conversations` is a string, expected a list of messages"),
        ("line 5", "empty conversation"),
        ("line 6", "invalid UTF-8"),
        ("line 7", "larger than the"),
        ("line 10", "expected a JSON object, found an array"),
    ];
    assert_eq!(listed.len(), expect.len(), "{listed:?}");
    for ((location, reason), (want_location, want_reason)) in listed.iter().zip(expect) {
        assert_eq!(location, want_location);
        assert!(reason.contains(want_reason), "{location}: `{reason}` lacks `{want_reason}`");
    }
    assert!(!d.rejection_reasons.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn bad_items_of_a_json_array_and_parquet_rows_are_reported_by_number(pool: PgPool) {
    let env = env();
    let array = env.root().join("items.json");
    std::fs::write(
        &array,
        br#"[{"prompt": "first question"}, 42, {"prompt": ""}, {"prompt": "fourth question"}, {"prompt": 5}]"#,
    )
    .unwrap();
    let id = import_path(&pool, &env, "array", &array, None).await.unwrap();
    let d = store::detail(&pool, id).await.unwrap();
    assert_eq!((d.summary.rows_imported, d.summary.rows_rejected), (2, 3));
    let locations: Vec<_> = d.rejections.iter().map(|r| r.location.as_str()).collect();
    assert_eq!(locations, ["item 2", "item 3", "item 5"]);

    let parquet = env.root().join("rows.parquet");
    write_parquet(
        &parquet,
        vec![
            json!({"prompt": "a real question", "id": 1}),
            json!({"prompt": "   ", "id": 2}),
            json!({"prompt": "another", "id": 3}),
        ],
    )
    .unwrap();
    let id = import_path(&pool, &env, "parquet", &parquet, None).await.unwrap();
    let d = store::detail(&pool, id).await.unwrap();
    assert_eq!((d.summary.rows_imported, d.summary.rows_rejected), (2, 1));
    assert_eq!(d.rejections[0].location, "row 2");
    assert!(d.rejections[0].reason.contains("blank"), "{}", d.rejections[0].reason);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn paths_outside_the_roots_are_refused(pool: PgPool) {
    let env = env();
    let outside = env.dir.path().join("secret.jsonl");
    write_jsonl(&outside, (0..3).map(|i| record(Schema::Sharegpt, i))).unwrap();
    let traversal = format!("{}/../secret.jsonl", env.root().display());
    let e = sources::resolve_path(&env.settings, &traversal).unwrap_err().to_string();
    assert!(e.contains("contains `..`"), "{e}");
    let e = sources::resolve_path(&env.settings, &outside.display().to_string()).unwrap_err().to_string();
    assert!(e.contains("is outside the dataset folders"), "{e}");
    let link = env.root().join("link.jsonl");
    std::os::unix::fs::symlink(&outside, &link).unwrap();
    let e = import_path(&pool, &env, "link", &link, None).await.unwrap_err().to_string();
    assert!(e.contains("is outside the dataset folders"), "{e}");
    let e = sources::resolve_path(&env.settings, "nothing-here.jsonl").unwrap_err().to_string();
    assert!(e.contains("no file at"), "{e}");
    // A relative name is looked up in the roots.
    std::fs::copy(&outside, env.root().join("inside.jsonl")).unwrap();
    assert!(sources::resolve_path(&env.settings, "inside.jsonl").is_ok());
    assert_eq!(store::count(&pool).await.unwrap(), 0, "no dataset was recorded for a refused source");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn files_that_are_not_datasets_are_refused_with_the_reason(pool: PgPool) {
    let env = env();
    let cases: [(&str, &[u8], &str); 5] = [
        ("image.jsonl", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "is a binary file"),
        ("table.csv", b"id,prompt\n1,hello\n", "is text that is not JSON (its first line is `id,prompt`)"),
        ("empty.jsonl", b"", "is empty"),
        ("object.json", b"{\n\"data\": [1, 2]\n}\n", "none of the first"),
        ("columns.jsonl", b"{\"a\": 1, \"b\": 2}\n", "no known schema fits the columns (a, b)"),
    ];
    for (name, content, expected) in cases {
        let path = env.root().join(name);
        std::fs::write(&path, content).unwrap();
        let e = import_path(&pool, &env, name, &path, None).await.unwrap_err().to_string();
        assert!(e.contains(expected), "{name}: `{e}` lacks `{expected}`");
    }
    // A file of many records none of which fits fails the import, with the first reason.
    let path = env.root().join("wrong.jsonl");
    write_jsonl(&path, (0..1500).map(|i| json!({"conversations": format!("text {i}")}))).unwrap();
    let id = import_path(&pool, &env, "wrong", &path, None).await.unwrap();
    let s = store::summary(&pool, id).await.unwrap();
    assert_eq!(s.status, DatasetStatus::Failed);
    assert!(
        s.error.as_deref().unwrap().contains("not a dataset: the first 1000 records were all refused"),
        "{:?}",
        s.error
    );
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM dataset_rows").fetch_one(&pool).await.unwrap();
    assert_eq!(rows, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn uploads_over_the_limit_are_refused_and_removed(pool: PgPool) {
    let env = env();
    let chunk = bytes::Bytes::from(vec![b'{'; 256 << 10]);
    let body = futures::stream::iter((0..5).map(|_| Ok::<_, std::io::Error>(chunk.clone())));
    let e = uploads::save(&env.settings, "big.jsonl", body).await.unwrap_err().to_string();
    assert!(e.contains("larger than the upload limit of 1 MiB (DS_UPLOAD_LIMIT)"), "{e}");
    let left = std::fs::read_dir(env.settings.files_dir.join("uploads")).unwrap().count();
    assert_eq!(left, 0, "the partial upload is removed");

    // Within the limit, the upload imports and its file is removed afterwards.
    let mut content = Vec::new();
    for i in 0..10 {
        content.extend(serde_json::to_vec(&record(Schema::Openai, i)).unwrap());
        content.push(b'\n');
    }
    let body = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(content))]);
    let up = uploads::save(&env.settings, "../../chat.jsonl", body).await.unwrap();
    assert_eq!(up.filename, "chat.jsonl");
    let started = import::start(
        &pool,
        &http(),
        &env.settings,
        import::NewImport {
            name: "uploaded".into(),
            source: SourceSpec::Upload { upload_id: up.upload_id.clone(), filename: up.filename },
            mapping: None,
            created_by: None,
        },
    )
    .await
    .unwrap();
    started.job.await.unwrap();
    let s = store::summary(&pool, started.id).await.unwrap();
    assert_eq!((s.status, s.rows_imported), (DatasetStatus::Ready, 10));
    assert!(uploads::resolve(&env.settings, &up.upload_id).is_err());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_mapping_given_by_the_user_overrides_detection(pool: PgPool) {
    let env = env();
    let path = env.root().join("magpie.jsonl");
    write_jsonl(
        &path,
        (0..6).map(|i| json!({"uuid": format!("u{i}"), "task": "math", "instruction": format!("Solve {i} + {i}"), "response": "..."})),
    )
    .unwrap();
    let mapping = Mapping {
        schema: Schema::Prompt,
        column: "instruction".into(),
        id_column: Some("uuid".into()),
        category_column: Some("task".into()),
        tools_column: None,
    };
    let id = import_path(&pool, &env, "magpie", &path, Some(mapping)).await.unwrap();
    let page = store::rows(&pool, id, None, None, 10).await.unwrap();
    assert_eq!(page.rows.len(), 6);
    assert_eq!((page.rows[0].row_key.as_str(), page.rows[0].category.as_deref()), ("u0", Some("math")));
    assert_eq!(page.rows[0].messages.len(), 1);

    let bad = Mapping { column: "text".into(), ..Mapping::new(Schema::Prompt) };
    let e = import_path(&pool, &env, "magpie2", &path, Some(bad)).await.unwrap_err().to_string();
    assert!(e.contains("column `text`, which the file does not have"), "{e}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn duplicates_are_counted_not_stored_twice_and_rows_page_by_key(pool: PgPool) {
    let env = env();
    let path = env.root().join("dups.jsonl");
    // 250 rows, each content twice; no id column, so the key is the content hash.
    write_jsonl(&path, (0..500).map(|i| json!({"prompt": format!("Question number {}", i % 250)}))).unwrap();
    let id = import_path(&pool, &env, "dups", &path, None).await.unwrap();
    let s = store::summary(&pool, id).await.unwrap();
    assert_eq!((s.rows_imported, s.rows_duplicate), (250, 250));
    let mut after = None;
    let mut seen = 0;
    loop {
        let page = store::rows(&pool, id, after, None, 100).await.unwrap();
        seen += page.rows.len();
        match page.next_after {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, 250);
    let e = import_path(&pool, &env, "dups", &path, None).await.unwrap_err().to_string();
    assert!(e.contains("exists already"), "{e}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_cancelled_import_keeps_no_rows_and_never_reads_ready(pool: PgPool) {
    let mut env = env();
    env.settings.max_row_bytes = 1 << 20;
    let path = env.root().join("big.jsonl");
    write_jsonl(
        &path,
        (0..200_000).map(|i| json!({"prompt": format!("Question number {i} about a long topic")})),
    )
    .unwrap();
    let started = import::start(
        &pool,
        &http(),
        &env.settings,
        import::NewImport {
            name: "big".into(),
            source: SourceSpec::Path { path: path.display().to_string() },
            mapping: None,
            created_by: None,
        },
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = store::summary(&pool, started.id).await.unwrap();
        assert_eq!(s.status, DatasetStatus::Importing, "the import ended before it could be cancelled");
        if s.rows_imported > 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    store::cancel(&pool, started.id, "tester").await.unwrap();
    started.job.await.unwrap();
    let s = store::summary(&pool, started.id).await.unwrap();
    assert_eq!(s.status, DatasetStatus::Cancelled);
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM dataset_rows WHERE dataset_id = $1")
        .bind(started.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
    let e = store::cancel(&pool, started.id, "tester").await.unwrap_err().to_string();
    assert!(e.contains("already ended"), "{e}");
}

fn authorized(headers: &HeaderMap) -> bool {
    headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer hf_secret")
}

/// A fake hub: lists two Parquet shards for `org/chat` (default/train) and serves them, only
/// to callers with the token.
async fn fake_hub(dir: &Path) -> std::net::SocketAddr {
    let shard_a = dir.join("a.parquet");
    let shard_b = dir.join("b.parquet");
    write_parquet(&shard_a, (0..20).map(|i| record(Schema::Openai, i))).unwrap();
    write_parquet(&shard_b, (20..35).map(|i| record(Schema::Openai, i))).unwrap();
    let shards = Arc::new(vec![std::fs::read(shard_a).unwrap(), std::fs::read(shard_b).unwrap()]);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app =
        Router::new()
            .route(
                "/api/datasets/{owner}/{name}/parquet/{config}/{split}",
                get(
                    move |UrlPath((owner, name, config, split)): UrlPath<(
                        String,
                        String,
                        String,
                        String,
                    )>,
                          headers: HeaderMap| async move {
                        if !authorized(&headers) {
                            return StatusCode::UNAUTHORIZED.into_response();
                        }
                        if (owner.as_str(), name.as_str(), config.as_str(), split.as_str())
                            != ("org", "chat", "default", "train")
                        {
                            return StatusCode::NOT_FOUND.into_response();
                        }
                        Json(vec![
                            format!("http://{addr}/files/0.parquet"),
                            format!("http://{addr}/files/1.parquet"),
                        ])
                        .into_response()
                    },
                ),
            )
            .route(
                "/api/datasets/{owner}/{name}/revision/{revision}",
                get(
                    |UrlPath((owner, name, revision)): UrlPath<(String, String, String)>,
                     headers: HeaderMap| async move {
                        if !authorized(&headers) || (owner.as_str(), name.as_str()) != ("org", "chat") {
                            return StatusCode::NOT_FOUND.into_response();
                        }
                        assert_eq!(
                            revision, "refs/convert/parquet",
                            "the conversion branch, percent-decoded by the router"
                        );
                        Json(serde_json::json!({"id": "org/chat", "sha": "3f5a8c1e9b7d"})).into_response()
                    },
                ),
            )
            .route(
                "/files/{n}",
                get(
                    move |State(shards): State<Arc<Vec<Vec<u8>>>>,
                          UrlPath(n): UrlPath<String>,
                          headers: HeaderMap| async move {
                        if !authorized(&headers) {
                            return StatusCode::UNAUTHORIZED.into_response();
                        }
                        let i: usize = n.trim_end_matches(".parquet").parse().unwrap();
                        shards[i].clone().into_response()
                    },
                ),
            )
            .with_state(shards);
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_hub_dataset_imports_through_the_hub_api(pool: PgPool) {
    let mut env = env();
    let addr = fake_hub(env.dir.path()).await;
    env.settings.hub_endpoint = url::Url::parse(&format!("http://{addr}")).unwrap();
    let hub = |repo: &str, split: &str, token: Option<&str>| SourceSpec::Hub {
        repo: repo.into(),
        config: "default".into(),
        split: split.into(),
        token: token.map(String::from),
    };
    let start = |name: &'static str, source: SourceSpec| {
        let pool = pool.clone();
        let settings = env.settings.clone();
        async move {
            import::start(
                &pool,
                &http(),
                &settings,
                import::NewImport { name: name.into(), source, mapping: None, created_by: None },
            )
            .await
        }
    };
    let e = start("no-token", hub("org/chat", "train", None)).await.err().unwrap().to_string();
    assert!(e.contains("refused access to `org/chat`") && e.contains("token"), "{e}");
    let e = start("no-split", hub("org/chat", "test", Some("hf_secret"))).await.err().unwrap().to_string();
    assert!(e.contains("no dataset `org/chat` with config `default` and split `test`"), "{e}");
    let e = start("bad-name", hub("../etc", "train", Some("hf_secret"))).await.err().unwrap().to_string();
    assert!(e.contains("not a hub dataset name"), "{e}");

    let started = start("hub", hub("org/chat", "train", Some("hf_secret"))).await.unwrap();
    started.job.await.unwrap();
    let d = store::detail(&pool, started.id).await.unwrap();
    assert_eq!(d.summary.status, DatasetStatus::Ready, "{:?}", d.summary.error);
    assert_eq!(d.summary.rows_imported, 35);
    assert_eq!(d.summary.format, "parquet");
    let stored: Value = sqlx::query_scalar("SELECT source FROM datasets WHERE id = $1")
        .bind(started.id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!stored.to_string().contains("hf_secret"), "the token is never stored: {stored}");
    assert_eq!(stored["revision"], "3f5a8c1e9b7d", "the conversion's commit is recorded: {stored}");
}

/// An import of `rows` prompts from a server file, started with a short lease (so a dead
/// holder's lease runs out quickly), and left as a killed process leaves it: its task stopped
/// mid-way (no lease renewed, nothing cleaned up), some batches written, its connections cut.
/// Returns its id.
async fn import_left_by_a_dead_process(main: &PgPool, env: &mut Env, name: &str, rows: usize) -> i64 {
    // The dying "process" has connections of its own, cut when it dies.
    let options = (*main.connect_options()).clone().application_name("dying import");
    let own = sqlx::postgres::PgPoolOptions::new().connect_with(options).await.unwrap();
    let pool = &own;
    env.settings.max_row_bytes = 1 << 20;
    env.settings.jobs.lease = Duration::from_millis(400);
    let path = env.root().join(format!("{name}.jsonl"));
    write_jsonl(
        &path,
        (0..rows).map(|i| json!({"prompt": format!("Question number {i} about a long topic")})),
    )
    .unwrap();
    let started = import::start(
        pool,
        &http(),
        &env.settings,
        import::NewImport {
            name: name.into(),
            source: SourceSpec::Path { path: path.display().to_string() },
            mapping: None,
            created_by: None,
        },
    )
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let s = store::summary(pool, started.id).await.unwrap();
        assert_eq!(s.status, DatasetStatus::Importing, "the import ended before its process was stopped");
        if s.rows_imported > 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    started.job.abort();
    let _ = started.job.await;
    // What a killed process's connections do: they drop, and the server rolls back whatever
    // transaction they had open (a batch half written).
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE application_name = 'dying import' AND datname = current_database()",
    )
    .execute(main)
    .await
    .unwrap();
    drop(own);
    started.id
}

async fn dataset_row(pool: &PgPool, id: i64) -> (DatasetStatus, i64, i64, i32, Option<String>) {
    let (status, imported, duplicate, claims, error): (DatasetStatus, i64, i64, i32, Option<String>) =
        sqlx::query_as(
            "SELECT status, rows_imported, rows_duplicate, claims, error FROM datasets WHERE id = $1",
        )
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap();
    (status, imported, duplicate, claims, error)
}

async fn stored_rows(pool: &PgPool, id: i64) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM dataset_rows WHERE dataset_id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Runs `jobs::run_next` until it takes an import over (or `within` passes).
async fn take_over(pool: &PgPool, env: &Env, within: Duration) -> Option<(i64, DatasetStatus)> {
    let (me, stop) = (uuid::Uuid::new_v4(), tokio_util::sync::CancellationToken::new());
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(ran) = jobs::run_next(pool, &http(), &env.settings, me, &stop).await.unwrap() {
            return Some(ran);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_import_whose_process_died_is_taken_over_and_read_again_from_the_start(pool: PgPool) {
    let mut env = env();
    let id = import_left_by_a_dead_process(&pool, &mut env, "orphan", 60_000).await;
    let (status, imported, _, claims, _) = dataset_row(&pool, id).await;
    assert_eq!((status, claims), (DatasetStatus::Importing, 1));
    assert!(imported > 0 && imported < 60_000, "half imported when its process died: {imported}");

    assert_eq!(take_over(&pool, &env, Duration::from_secs(30)).await, Some((id, DatasetStatus::Ready)));
    let (status, imported, duplicate, claims, error) = dataset_row(&pool, id).await;
    assert_eq!((status, imported, duplicate, claims, error), (DatasetStatus::Ready, 60_000, 0, 2, None));
    assert_eq!(
        stored_rows(&pool, id).await,
        60_000,
        "every row once: the dead process's rows were not kept twice"
    );
    let lease: Option<uuid::Uuid> = sqlx::query_scalar("SELECT lease_owner FROM datasets WHERE id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(lease, None, "a finished import holds no lease");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_import_whose_source_cannot_be_read_again_is_failed_with_the_reason(pool: PgPool) {
    let mut env = env();
    let id = import_left_by_a_dead_process(&pool, &mut env, "gone", 60_000).await;
    std::fs::remove_file(env.root().join("gone.jsonl")).unwrap();
    assert_eq!(take_over(&pool, &env, Duration::from_secs(30)).await, Some((id, DatasetStatus::Failed)));
    let (status, _, _, _, error) = dataset_row(&pool, id).await;
    assert_eq!(status, DatasetStatus::Failed);
    let error = error.unwrap();
    assert!(
        error.contains("stopped, and its source (server file") && error.contains("Import it again"),
        "{error}"
    );
    assert_eq!(stored_rows(&pool, id).await, 0, "a failed import keeps no rows");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_import_that_keeps_stopping_its_process_is_failed_and_keeps_no_rows(pool: PgPool) {
    let mut env = env();
    let id = import_left_by_a_dead_process(&pool, &mut env, "deadly", 60_000).await;
    // This import has used its last start (it stopped three processes).
    sqlx::query("UPDATE datasets SET claims = 3 WHERE id = $1").bind(id).execute(&pool).await.unwrap();
    assert_eq!(take_over(&pool, &env, Duration::from_secs(2)).await, None, "nobody starts it a fourth time");
    let (status, _, _, _, error) = dataset_row(&pool, id).await;
    assert_eq!(status, DatasetStatus::Failed, "never left importing");
    let error = error.unwrap();
    assert!(
        error.contains("stopped before it finished, 3 times") && error.contains("Import the file again"),
        "{error}"
    );
    assert_eq!(stored_rows(&pool, id).await, 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_ends_an_import_whose_process_died_and_removes_its_rows(pool: PgPool) {
    let mut env = env();
    let id = import_left_by_a_dead_process(&pool, &mut env, "cancelled", 60_000).await;
    assert!(stored_rows(&pool, id).await > 0);
    store::cancel(&pool, id, "tester").await.unwrap();
    assert_eq!(dataset_row(&pool, id).await.0, DatasetStatus::Cancelled);
    assert_eq!(stored_rows(&pool, id).await, 0, "the cancel removed the rows nobody else would");
    assert_eq!(
        take_over(&pool, &env, Duration::from_secs(1)).await,
        None,
        "a cancelled import is not taken over"
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_stopping_process_hands_its_import_to_the_next_at_once(pool: PgPool) {
    let mut env = env();
    let id = import_left_by_a_dead_process(&pool, &mut env, "handed", 60_000).await;
    // A process takes it over under a lease that would outlast the test, and is stopped
    // (Ctrl-C) while it reads: it hands the import back, uncounted.
    env.settings.jobs.lease = Duration::from_secs(600);
    let stopping = tokio_util::sync::CancellationToken::new();
    let (pool2, settings, stop) = (pool.clone(), env.settings.clone(), stopping.clone());
    let handed = tokio::spawn(async move {
        let me = uuid::Uuid::new_v4();
        loop {
            let ran = jobs::run_next(&pool2, &reqwest::Client::new(), &settings, me, &stop).await.unwrap();
            if ran.is_some() {
                return ran;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while dataset_row(&pool, id).await.3 < 2 {
        assert!(tokio::time::Instant::now() < deadline, "nobody took the import over");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stopping.cancel();
    assert_eq!(handed.await.unwrap(), Some((id, DatasetStatus::Importing)));
    let (status, _, _, claims, _) = dataset_row(&pool, id).await;
    assert_eq!((status, claims), (DatasetStatus::Importing, 1), "handed back; the start did not count");
    assert_eq!(
        take_over(&pool, &env, Duration::from_secs(5)).await,
        Some((id, DatasetStatus::Ready)),
        "taken at once, not after 600 s"
    );
    assert_eq!(stored_rows(&pool, id).await, 60_000);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn tool_calling_rows_import_and_rows_with_broken_tool_json_are_refused(pool: PgPool) {
    let env = env();
    let weather = json!({"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}});
    // OpenAI messages with a tools list; the arguments of one call are an object, as some sets store them.
    let openai = |id: &str, arguments: Value| {
        json!({"id": id, "tools": [weather.clone()], "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "18 C"},
            {"role": "assistant", "content": "It is 18 °C."}]})
    };
    // glaive-style ShareGPT: bare functions as a JSON string, a function_call turn, an observation.
    let glaive = |id: &str, call: &str| {
        json!({"id": id, "tools": r#"[{"name": "get_time", "parameters": {"type": "object", "properties": {}}}]"#,
            "conversations": [
                {"from": "human", "value": "What time is it?"},
                {"from": "function_call", "value": call},
                {"from": "observation", "value": "{\"time\": \"14:05\"}"},
                {"from": "gpt", "value": "It is 14:05."}]})
    };
    let openai_path = env.root().join("agent.jsonl");
    write_jsonl(
        &openai_path,
        vec![
            openai("o1", json!("{\"city\": \"Paris\"}")),
            openai("o2", json!({"city": "Paris"})),
            openai("o3", json!("{\"city\": ")), // broken arguments
            json!({"id": "o4", "tools": "[{\"type\": ", "messages": [{"role": "user", "content": "hi"}]}), // broken tools
            json!({"id": "o5", "messages": [{"role": "user", "content": "hi"},
                {"role": "tool", "tool_call_id": "nope", "content": "x"}]}), // a result no call asked for
        ],
    )
    .unwrap();
    let id = import_path(&pool, &env, "agent", &openai_path, None).await.unwrap();
    let d = store::detail(&pool, id).await.unwrap();
    assert_eq!(d.summary.mapping.tools_column.as_deref(), Some("tools"), "the tools column is detected");
    assert_eq!((d.summary.rows_imported, d.summary.rows_rejected), (2, 3), "{:?}", d.rejections);
    let reasons: Vec<(&str, &str)> =
        d.rejections.iter().map(|r| (r.location.as_str(), r.reason.as_str())).collect();
    assert!(reasons[0].0 == "line 3" && reasons[0].1.contains("not valid JSON"), "{reasons:?}");
    assert!(
        reasons[1].0 == "line 4" && reasons[1].1.contains("tools column `tools` holds broken JSON"),
        "{reasons:?}"
    );
    assert!(reasons[2].0 == "line 5" && reasons[2].1.contains("answers tool call `nope`"), "{reasons:?}");
    let stored: Vec<(Value, Value)> =
        sqlx::query_as("SELECT messages, tools FROM dataset_rows WHERE dataset_id = $1 ORDER BY row_key")
            .bind(id)
            .fetch_all(&pool)
            .await
            .unwrap();
    for (messages, tools) in &stored {
        assert_eq!(tools, &json!([weather]));
        // Arguments are kept as JSON text, an object written out.
        let arguments = messages[1]["tool_calls"][0]["function"]["arguments"].as_str().unwrap();
        assert_eq!(serde_json::from_str::<Value>(arguments).unwrap(), json!({"city": "Paris"}));
        assert_eq!(messages[2]["role"], "tool");
        assert_eq!(messages[2]["tool_call_id"], "c1");
    }

    let glaive_path = env.root().join("glaive.jsonl");
    write_jsonl(
        &glaive_path,
        vec![glaive("g1", r#"{"name": "get_time", "arguments": {}}"#), glaive("g2", "{name: get_time")],
    )
    .unwrap();
    let id = import_path(&pool, &env, "glaive", &glaive_path, None).await.unwrap();
    let d = store::detail(&pool, id).await.unwrap();
    assert_eq!((d.summary.rows_imported, d.summary.rows_rejected), (1, 1), "{:?}", d.rejections);
    assert!(d.rejections[0].reason.contains("function call whose JSON is broken"), "{:?}", d.rejections);
    let (messages, tools): (Value, Value) =
        sqlx::query_as("SELECT messages, tools FROM dataset_rows WHERE dataset_id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(tools[0]["type"], "function", "bare functions are wrapped: {tools}");
    assert_eq!(tools[0]["function"]["name"], "get_time");
    let roles: Vec<&str> = messages.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "assistant"]);
    let call = &messages[1]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_time");
    assert_eq!(messages[2]["tool_call_id"], call["id"], "the observation answers the call");
}
