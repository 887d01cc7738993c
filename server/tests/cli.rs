//! The CLI over the API, end to end: the built binary serves the app, and the binary's `run` and
//! `export` commands (and the Python example of docs/api.md) drive it with a token against the
//! simulator; exit codes are checked.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use engine::testing;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::{path::Path, process::Stdio, time::Duration};

const BIN: &str = env!("CARGO_BIN_EXE_draft-studio");

struct Served {
    url: String,
    _child: tokio::process::Child,
    data_dir: std::path::PathBuf,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn database_url(connect: &PgConnectOptions) -> String {
    let server = std::env::var("DATABASE_URL").unwrap();
    format!("{}/{}", server.rsplit_once('/').unwrap().0, connect.get_database().unwrap())
}

async fn serve(connect: &PgConnectOptions) -> Served {
    let port = free_port();
    let data_dir = std::env::temp_dir().join(format!("ds-cli-{port}-{}", rand::random::<u32>()));
    std::fs::create_dir_all(data_dir.join("datasets")).unwrap();
    let child = tokio::process::Command::new(BIN)
        .arg("serve")
        .env("DATABASE_URL", database_url(connect))
        .env("DS_BIND", format!("127.0.0.1:{port}"))
        .env("DS_DATA_DIR", &data_dir)
        .env("DS_DATASET_ROOTS", data_dir.join("datasets"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..200 {
        if reqwest::get(format!("{url}/healthz")).await.is_ok_and(|r| r.status().is_success()) {
            return Served { url, _child: child, data_dir };
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the server did not become healthy");
}

/// Runs the CLI with `DS_URL`/`DS_TOKEN`; its exit code, stdout and stderr.
async fn cli(served: &Served, token: &str, args: &[&str]) -> (i32, String, String) {
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new(BIN)
            .args(args)
            .env("DS_URL", &served.url)
            .env("DS_TOKEN", token)
            .env_remove("DATABASE_URL")
            .output(),
    )
    .await
    .expect("the command ends")
    .unwrap();
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn run_and_export_commands_wait_and_exit_with_a_code_a_scheduler_can_use(
    options: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = options.connect_with(connect.clone()).await.unwrap();
    let sim = testing::sim(testing::fast_sim()).await;
    let user = testing::user(&pool).await;
    let token = engine::auth::tokens::create(&pool, user, "cli", 1).await.unwrap().token;
    let dataset = testing::dataset(&pool, 8).await;
    let endpoint = testing::endpoint(&pool, &sim, user).await;
    let served = serve(&connect).await;
    let settings = served.data_dir.join("run.json");
    std::fs::write(
        &settings,
        serde_json::json!({"name": "cli run", "dataset_id": dataset, "endpoint_ids": [endpoint], "max_tokens": 200})
            .to_string(),
    )
    .unwrap();
    let settings = settings.to_str().unwrap();

    // Flags complete the settings file; the run completes and --wait says so with 0.
    let (code, out, err) = cli(
        &served,
        &token,
        &["run", "start", "--settings", settings, "--model", testing::MODEL, "--wait", "--interval", "0.2"],
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("completed: 8 of 8 finished"), "{out}");
    let run: i64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (code, out, _) = cli(&served, &token, &["run", "status", &run.to_string()]).await;
    assert_eq!((code, out.starts_with(&format!("run {run} completed"))), (0, true), "{out}");

    // Bad input: the form's validation (no model), a stale state, an unknown id, a bad file.
    let (code, _, err) = cli(&served, &token, &["run", "start", "--settings", settings]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("model"), "{err}");
    let (code, _, err) = cli(&served, &token, &["run", "pause", &run.to_string()]).await;
    assert_eq!(code, 2, "pausing a completed run: {err}");
    let (code, _, _) = cli(&served, &token, &["run", "status", "999999"]).await;
    assert_eq!(code, 2);
    let (code, _, err) = cli(&served, &token, &["run", "start", "--settings", "/nonexistent.json"]).await;
    assert_eq!(code, 2, "{err}");
    // Unauthorized: a wrong token, or none.
    let (code, _, err) = cli(&served, "ds_wrong", &["run", "status", &run.to_string()]).await;
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("/tokens"), "{err}");
    let (code, _, _) = cli(&served, "", &["run", "status", &run.to_string()]).await;
    assert_eq!(code, 3);
    // The server unreachable.
    let dead = Served { url: format!("http://127.0.0.1:{}", free_port()), ..serve_nothing() };
    let (code, _, _) = cli(&dead, &token, &["run", "status", "1"]).await;
    assert_eq!(code, 6);

    // A run cancelled while --wait watches it ends with 4.
    let mut slow_config = testing::fast_sim();
    slow_config.time_scale = 1.0;
    slow_config.engine.per_seq_tokens_per_s = 5.0;
    let slow = testing::sim(slow_config).await;
    let slow_endpoint = testing::endpoint(&pool, &slow, user).await;
    let endpoint_arg = slow_endpoint.to_string();
    let dataset_arg = dataset.to_string();
    let waiting = {
        let args: Vec<String> = [
            "run",
            "start",
            "--name",
            "slow",
            "--dataset",
            &dataset_arg,
            "--endpoint",
            &endpoint_arg,
            "--model",
            testing::MODEL,
            "--wait",
            "--interval",
            "0.2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let url = served.url.clone();
        let token = token.clone();
        tokio::spawn(async move {
            let output = tokio::process::Command::new(BIN)
                .args(&args)
                .env("DS_URL", url)
                .env("DS_TOKEN", token)
                .output()
                .await
                .unwrap();
            (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned())
        })
    };
    let slow_run = loop {
        let found: Option<i64> = sqlx::query_scalar("SELECT id FROM runs WHERE name = 'slow'")
            .fetch_optional(&pool)
            .await
            .unwrap();
        if let Some(id) = found {
            break id;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let (code, out, err) = cli(&served, &token, &["run", "cancel", &slow_run.to_string()]).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out) = tokio::time::timeout(Duration::from_secs(60), waiting).await.unwrap().unwrap();
    assert_eq!(code, 4, "{out}");
    assert!(out.contains("cancelled"), "{out}");

    // Export from a preset with --wait, then download its files.
    let mut spec = domain::export::ExportSpec {
        selection: domain::export::ExportSelection::for_runs(vec![run]),
        format: domain::export::ExportFormat::default(),
        destination: domain::export::Destination::Directory { path: "cli".into() },
    };
    spec.selection.review = domain::export::ReviewFilter::All;
    engine::export::store::save_preset(&pool, "everything", &spec, Some(user)).await.unwrap();
    let (code, out, err) =
        cli(&served, &token, &["export", "start", "--preset", "everything", "--wait", "--interval", "0.2"])
            .await;
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("completed"), "{out}");
    let export: i64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let target = served.data_dir.join("downloaded");
    let (code, out, err) =
        cli(&served, &token, &["export", "download", &export.to_string(), "--out", target.to_str().unwrap()])
            .await;
    assert_eq!(code, 0, "{out}{err}");
    let record = engine::export::store::get(&pool, export).await.unwrap();
    let folder = std::path::PathBuf::from(record.location.unwrap());
    for name in ["train.jsonl", "manifest.json"] {
        assert_eq!(
            std::fs::read(target.join(name)).unwrap(),
            std::fs::read(folder.join(name)).unwrap(),
            "{name}"
        );
    }
    assert!(!std::fs::read_dir(&target).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains("partial")));
    let (code, _, err) = cli(&served, &token, &["export", "start", "--preset", "nope"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("everything"), "names the presets there are: {err}");

    // The help lists the exit codes.
    let (code, out, _) = cli(&served, &token, &["run", "--help"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("Exit codes: 0 completed") && out.contains("3 unauthorized"), "{out}");
}

/// A `Served` for a URL nothing listens on.
fn serve_nothing() -> Served {
    Served {
        url: String::new(),
        _child: tokio::process::Command::new("true").spawn().unwrap(),
        data_dir: std::env::temp_dir(),
    }
}

/// The Python block of docs/api.md.
fn python_example() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/api.md")).unwrap();
    let start = doc.find("```python\n").expect("docs/api.md has a python example") + "```python\n".len();
    let end = start + doc[start..].find("```").unwrap();
    doc[start..end].to_string()
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn the_python_example_runs_the_whole_pipeline(options: PgPoolOptions, connect: PgConnectOptions) {
    let pool = options.connect_with(connect.clone()).await.unwrap();
    let sim = testing::sim(testing::fast_sim()).await;
    let user = testing::user(&pool).await;
    let token = engine::auth::tokens::create(&pool, user, "python", 1).await.unwrap().token;
    let served = serve(&connect).await;
    let prompts = served.data_dir.join("datasets/prompts.jsonl");
    let lines: String = (0..5)
        .map(|i| {
            serde_json::json!({"messages": [{"role": "user", "content": format!("Tell me about {i}.")}]})
                .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&prompts, lines).unwrap();
    let script = served.data_dir.join("pipeline.py");
    std::fs::write(&script, python_example()).unwrap();
    let out_dir = served.data_dir.join("py-out");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("python3")
            .arg(&script)
            .env("DS_URL", &served.url)
            .env("DS_TOKEN", &token)
            .env("DS_DATASET_PATH", &prompts)
            .env("DS_VLLM_URL", sim.base_url())
            .env("DS_MODEL", testing::MODEL)
            .env("DS_OUT", &out_dir)
            .output(),
    )
    .await
    .expect("the script ends")
    .unwrap();
    let log = String::from_utf8_lossy(&output.stdout).to_string() + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    let ok: i64 =
        sqlx::query_scalar("SELECT count(*) FROM samples WHERE state = 'ok' AND review_state = 'approved'")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(ok > 0, "{log}");
    assert!(log.contains(&format!("approved {ok}, exported {ok} rows")), "{log}");
    let train = std::fs::read_to_string(out_dir.join("train.jsonl")).unwrap();
    assert_eq!(train.lines().count() as i64, ok, "{log}");
    // Made for SpecForge's offline loader: `tools` on every row, as JSON text.
    for line in train.lines() {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(row["tools"], "[]", "{row}");
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("manifest.json")).unwrap()).unwrap();
    assert!(manifest["load"][0].as_str().unwrap().contains("prepare_hidden_states.py"), "{manifest}");
}

/// A simulator serving a draft of 3 tokens that accepts with `chance` (0.1 on prompts of the
/// `even` category's questions, which hold "MATH").
fn draft_sim(chance: f64) -> vllm_sim::SimConfig {
    let mut config = testing::fast_sim();
    config.draft.num_speculative_tokens = 3;
    config.draft.draft_acceptance = chance;
    config.draft.draft_acceptance_rules =
        vec![vllm_sim::AcceptanceRule { contains: "MATH".into(), chance: 0.1 }];
    config.draft.per_request_spec_decode_metrics = true;
    config
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn drafts_are_evaluated_on_an_earlier_runs_prompts_and_compared_from_the_command_line(
    options: PgPoolOptions,
    connect: PgConnectOptions,
) {
    let pool = options.connect_with(connect.clone()).await.unwrap();
    let user = testing::user(&pool).await;
    let token = engine::auth::tokens::create(&pool, user, "cli", 1).await.unwrap().token;
    let questions: Vec<String> = (0..12)
        .map(|i| if i % 2 == 0 { format!("MATH question {i}") } else { format!("Question {i}") })
        .collect();
    let dataset = testing::dataset_of(&pool, &questions).await;
    let strong = testing::sim(draft_sim(0.9)).await;
    let weak = testing::sim(draft_sim(0.5)).await;
    let strong = testing::endpoint(&pool, &strong, user).await;
    let weak = testing::endpoint(&pool, &weak, user).await;
    let served = serve(&connect).await;
    let start = |endpoint: i64, draft: &'static str, extra: Vec<String>| {
        let mut args: Vec<String> =
            ["run", "start", "--name", draft, "--model", testing::MODEL, "--max-tokens", "200"]
                .map(String::from)
                .to_vec();
        args.extend(["--endpoint".into(), endpoint.to_string(), "--draft".into(), draft.into()]);
        args.extend(extra);
        args.extend(["--wait".into(), "--interval".into(), "0.2".into()]);
        args
    };
    let args = start(strong, "eagle3@s100", vec!["--dataset".into(), dataset.to_string()]);
    let (code, out, err) = cli(&served, &token, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(code, 0, "{out}{err}");
    let a: i64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();
    let args = start(weak, "eagle3@s200", vec!["--from-run".into(), a.to_string()]);
    let (code, out, err) = cli(&served, &token, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(code, 0, "{out}{err}");
    let b: i64 = out.split_whitespace().nth(1).unwrap().parse().unwrap();

    let (code, out, err) = cli(&served, &token, &["acceptance", "show", &a.to_string()]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("(draft eagle3@s100)") && out.contains("over 12 samples"), "{out}");
    assert!(out.contains("even") && out.contains("odd"), "{out}");
    let (code, out, err) =
        cli(&served, &token, &["acceptance", "compare", &a.to_string(), &b.to_string()]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("12 shared prompts") && out.contains("over 12 prompts"), "{out}");
    let (code, out, _) =
        cli(&served, &token, &["acceptance", "compare", &a.to_string(), &b.to_string(), "--json"]).await;
    assert_eq!(code, 0);
    let comparison: serde_json::Value = serde_json::from_str(&out).unwrap();
    let odd =
        comparison["by_category"].as_array().unwrap().iter().find(|c| c[0] == "odd").unwrap()[1].clone();
    assert!(odd["difference"].as_f64().unwrap() < 0.0, "B's draft accepts less on odd prompts: {odd}");

    // The loop: both revisions of `eagle3`, the second's change paired on the first's prompts.
    let (code, out, err) = cli(&served, &token, &["acceptance", "loop", "eagle3"]).await;
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("s100  ← no export (starting draft)"), "{out}");
    assert!(out.contains(&format!("run {b} overall")) && out.contains("vs s100"), "{out}");
    let (code, out, _) = cli(&served, &token, &["acceptance", "drafts", "--name", "eagle3"]).await;
    assert_eq!(code, 0);
    assert!(out.contains("eagle3@s200  no export recorded"), "{out}");
    let (code, _, err) =
        cli(&served, &token, &["acceptance", "register", "eagle3@s300", "--trained-on", "9999"]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("export 9999 does not exist"), "{err}");

    // A draft on a server without one is refused before anything starts, with what to do.
    let plain = testing::sim(testing::fast_sim()).await;
    let plain = testing::endpoint(&pool, &plain, user).await;
    let args = start(plain, "nothing", vec!["--from-run".into(), a.to_string()]);
    let (code, _, err) = cli(&served, &token, &args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("runs no draft"), "{err}");
    let (code, _, err) =
        cli(&served, &token, &["acceptance", "compare", &a.to_string(), &a.to_string()]).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("two different runs"), "{err}");
}
