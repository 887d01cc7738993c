//! A curated set that cannot drift (issue 15): review state follows the text, safe export
//! defaults with counts of what each filter removed, export jobs that survive a killed process,
//! and settings stored by an older release.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::export::*;
use domain::generation::{RunSettings, SampleState};
use domain::review::{Decision, ReviewEventKind, ReviewState, SampleFilter};
use domain::{Role, Viewer};
use engine::export::runner::{self, JobOptions};
use engine::export::{job, lease, selection, S3Options, Storage};
use engine::generation::queue::{self, Next, Output, TryRecord};
use engine::review::{self, detail, list, regenerate, DecisionInput};
use engine::runs::{self, RetryPass};
use engine::testing::*;
use engine::vllm::{http_client, TokenIds};
use sqlx::PgPool;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

async fn person(pool: &PgPool, name: &str, role: Role) -> Viewer {
    let user = engine::auth::create_user(
        pool,
        engine::auth::NewUser { username: name, password: "a-long-password", role },
    )
    .await
    .unwrap();
    Viewer { id: user.id, username: user.username, role }
}

async fn decide(pool: &PgPool, by: &Viewer, sample_id: i64, decision: Decision, flags: &[&str]) -> i32 {
    let version: i32 = sqlx::query_scalar("SELECT review_version FROM samples WHERE id = $1")
        .bind(sample_id)
        .fetch_one(pool)
        .await
        .unwrap();
    review::decide(
        pool,
        by,
        DecisionInput {
            sample_id,
            version,
            decision,
            flags: flags.iter().map(|f| f.to_string()).collect(),
            note: None,
        },
    )
    .await
    .unwrap()
}

async fn ids_of(pool: &PgPool, run: i64) -> Vec<i64> {
    sqlx::query_scalar("SELECT id FROM samples WHERE run_id = $1 ORDER BY id")
        .bind(run)
        .fetch_all(pool)
        .await
        .unwrap()
}

/// (kind, from, to, text hash) of a sample's audit log, oldest first.
async fn audit(
    pool: &PgPool,
    sample_id: i64,
) -> Vec<(ReviewEventKind, ReviewState, ReviewState, Option<Vec<u8>>)> {
    sqlx::query_as(
        "SELECT kind, from_state, to_state, text_hash FROM review_events WHERE sample_id = $1 ORDER BY id",
    )
    .bind(sample_id)
    .fetch_all(pool)
    .await
    .unwrap()
}

async fn text_hash(pool: &PgPool, sample_id: i64) -> Vec<u8> {
    sqlx::query_scalar("SELECT sample_text_hash(messages, reasoning, content) FROM samples WHERE id = $1")
        .bind(sample_id)
        .fetch_one(pool)
        .await
        .unwrap()
}

// (a) ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_approved_sample_regenerated_by_a_retry_pass_is_unreviewed_and_not_exported_as_approved(
    pool: PgPool,
) {
    let sim = sim(fast_sim()).await;
    let eng = person(&pool, "ann", Role::Engineer).await;
    let endpoint = endpoint(&pool, &sim, eng.id).await;
    let run = create_run(&pool, dataset(&pool, 4).await, settings(vec![endpoint]), eng.id).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;

    let ids = ids_of(&pool, run).await;
    let mut approved_hashes = Vec::new();
    for &id in &ids {
        decide(&pool, &eng, id, Decision::Approve, &[]).await;
        approved_hashes.push(text_hash(&pool, id).await);
    }
    let approved_only = ExportSelection::for_runs(vec![run]).approved_only();
    let before = selection::plan(&pool, &approved_only, 0.0).await.unwrap();
    assert_eq!(before.preview.selected, 4, "{:?}", before.preview);

    // A retry pass over the `ok` samples (say, with a larger budget) generates them again.
    let pass = RetryPass { states: vec![SampleState::Ok], ..Default::default() };
    assert_eq!(runs::retry(&pool, &http_client(), run, pass).await.unwrap(), 4);
    // Already while they wait for their new text, nothing of theirs counts as approved.
    let still_approved: i64 =
        sqlx::query_scalar("SELECT count(*) FROM samples WHERE run_id = $1 AND review_state <> 'unreviewed'")
            .bind(run)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(still_approved, 0);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    let after = selection::plan(&pool, &approved_only, 0.0).await.unwrap();
    assert!(after.samples.is_empty(), "approved-only exports none of the regenerated samples");
    assert_eq!(after.preview.unreviewed_removed, 4, "{:?}", after.preview);
    for (&id, old_hash) in ids.iter().zip(&approved_hashes) {
        let (state, review_state): (SampleState, ReviewState) =
            sqlx::query_as("SELECT state, review_state FROM samples WHERE id = $1")
                .bind(id)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!((state, review_state), (SampleState::Ok, ReviewState::Unreviewed));
        // Both decisions are in the audit log with the text they applied to: the approval, and
        // the retry pass that dropped it.
        let log = audit(&pool, id).await;
        assert_eq!(log.len(), 2, "{log:?}");
        assert_eq!(
            (log[0].0, log[0].1, log[0].2, log[0].3.as_ref()),
            (ReviewEventKind::Decision, ReviewState::Unreviewed, ReviewState::Approved, Some(old_hash))
        );
        assert_eq!(
            (log[1].0, log[1].1, log[1].2, log[1].3.as_ref()),
            (ReviewEventKind::Requeue, ReviewState::Approved, ReviewState::Unreviewed, Some(old_hash))
        );
        let page = detail::load(&pool, &eng, id).await.unwrap();
        let since = page.regenerated_since.expect("the sample page says it was regenerated");
        assert_eq!((since.decision, since.reviewer.as_deref()), (ReviewState::Approved, Some("ann")));
        assert_eq!(since.text_changed, text_hash(&pool, id).await != *old_hash);
        assert!(since.describe().starts_with("Regenerated since your decision"), "{}", since.describe());
    }
    let rows =
        list::page(&pool, &SampleFilter { run: Some(run), ..Default::default() }, None, None).await.unwrap();
    assert!(rows.rows.iter().all(|r| r.regenerated_since_decision), "the list marks every one");

    // A new decision on the new text clears the mark and exports it again.
    decide(&pool, &eng, ids[0], Decision::Approve, &[]).await;
    assert!(detail::load(&pool, &eng, ids[0]).await.unwrap().regenerated_since.is_none());
    let again = selection::plan(&pool, &approved_only, 0.0).await.unwrap();
    assert_eq!(again.samples.iter().map(|s| s.id).collect::<Vec<_>>(), vec![ids[0]]);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_regeneration_drops_the_decision_and_a_decision_needs_a_finished_sample(pool: PgPool) {
    let run = finished_run(&pool, &[SeedSample::answered("What is 2+2?", "Add them.", "4")]).await;
    let ann = person(&pool, "ann", Role::Reviewer).await;
    let id = ids_of(&pool, run).await[0];
    let version = decide(&pool, &ann, id, Decision::Reject, &[]).await;
    let hash = text_hash(&pool, id).await;
    regenerate::regenerate(&pool, &ann, id, version).await.unwrap();
    let log = audit(&pool, id).await;
    assert_eq!(log.last().unwrap().0, ReviewEventKind::Regenerate);
    assert_eq!((log.last().unwrap().1, log.last().unwrap().3.as_ref()), (ReviewState::Rejected, Some(&hash)));
    let since = detail::load(&pool, &ann, id).await.unwrap().regenerated_since.unwrap();
    assert!(!since.text_changed, "the new text has not arrived yet");

    // The database itself refuses a decision on a sample that is not finished.
    let refused =
        sqlx::query("UPDATE samples SET review_state = 'approved', reviewed_at = now() WHERE id = $1")
            .bind(id)
            .execute(&pool)
            .await
            .unwrap_err()
            .to_string();
    assert!(refused.contains("samples_decided_only_when_finished"), "{refused}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_failed_try_leaves_no_older_conversation_or_token_ids_current(pool: PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let run = create_run(&pool, dataset(&pool, 1).await, settings(vec![endpoint]), by).await;
    // No worker runs: this test plays the worker's part.
    let worker = uuid::Uuid::new_v4();
    let id = queue::claim(&pool, run, worker, Duration::from_secs(60), 1).await.unwrap()[0].id;
    let answered = Output {
        reasoning: Some("first reasoning".into()),
        content: Some("first answer".into()),
        messages: Some(serde_json::json!([
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "first answer", "reasoning_content": "first reasoning"}
        ])),
        tokens: Some(vec![TokenIds { prompt: vec![1, 2, 3], completion: vec![4, 5] }]),
        ..Default::default()
    };
    let ok = TryRecord { result: "ok", ..Default::default() };
    assert!(queue::settle(&pool, id, worker, Next::Finish(SampleState::Ok), answered, ok).await.unwrap());
    let tokens: i64 = sqlx::query_scalar("SELECT count(*) FROM sample_tokens WHERE sample_id = $1")
        .bind(id)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(tokens, 1);

    let pass = RetryPass { states: vec![SampleState::Ok], ..Default::default() };
    runs::retry(&pool, &http_client(), run, pass).await.unwrap();
    assert_eq!(queue::claim(&pool, run, worker, Duration::from_secs(60), 1).await.unwrap()[0].id, id);
    let partial = Output { reasoning: Some("second, cut".into()), ..Default::default() };
    let failed = TryRecord { result: "error", error: Some("HTTP 500".into()), ..Default::default() };
    assert!(queue::settle(&pool, id, worker, Next::Finish(SampleState::Failed), partial, failed)
        .await
        .unwrap());

    let (messages, reasoning, content, captured, tokens): (
        Option<serde_json::Value>,
        Option<String>,
        Option<String>,
        Option<bool>,
        i64,
    ) = sqlx::query_as(
        "SELECT messages, reasoning, content, captured_token_ids,
                (SELECT count(*) FROM sample_tokens t WHERE t.sample_id = s.id) FROM samples s WHERE id = $1",
    )
    .bind(id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(messages, None, "the first try's conversation is gone");
    assert_eq!((reasoning.as_deref(), content), (Some("second, cut"), None));
    assert_eq!((captured, tokens), (None, 0), "no token ids of the first try remain");
    // Nothing of it can be exported, whatever the outcome filter.
    let mut s = ExportSelection::for_runs(vec![run]);
    s.outcomes = vec![SampleState::Failed];
    s.review = ReviewFilter::All;
    s.excluded_flags.clear();
    assert!(selection::plan(&pool, &s, 0.0).await.unwrap().samples.is_empty());
}

// (b) ---------------------------------------------------------------------------------------

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_default_export_leaves_out_rejected_and_flagged_samples_and_its_preview_counts_them(pool: PgPool) {
    let seeds = vec![
        SeedSample::answered("approved?", "r", "approved answer"),
        SeedSample::answered("rejected?", "r", "rejected answer"),
        SeedSample::answered("flagged by a reviewer?", "r", "flagged answer"),
        SeedSample::answered("flagged by the engine?", "r", "<think>leftover</think> answer"),
        SeedSample::answered("unreviewed?", "r", "unreviewed answer"),
        SeedSample::answered("unreviewed?", "r", "unreviewed answer"),
    ];
    let run = finished_run(&pool, &seeds).await;
    let ids = ids_of(&pool, run).await;
    let ann = person(&pool, "ann", Role::Reviewer).await;
    decide(&pool, &ann, ids[0], Decision::Approve, &[]).await;
    decide(&pool, &ann, ids[1], Decision::Reject, &[]).await;
    decide(&pool, &ann, ids[2], Decision::Flag, &["refusal"]).await;
    sqlx::query("UPDATE samples SET auto_flags = '{think_markers}' WHERE id = $1")
        .bind(ids[3])
        .execute(&pool)
        .await
        .unwrap();

    let default = ExportSelection::for_runs(vec![run]);
    assert_eq!(default.review, ReviewFilter::NotRejectedOrFlagged);
    assert!(PROBLEM_FLAGS.iter().all(|f| default.excluded_flags.contains(&f.to_string())));
    let plan = selection::plan(&pool, &default, 0.0).await.unwrap();
    let p = &plan.preview;
    assert_eq!(plan.samples.iter().map(|s| s.id).collect::<Vec<_>>(), vec![ids[0], ids[4]]);
    assert_eq!((p.rejected_removed, p.flagged_removed, p.unreviewed_removed), (1, 2, 0), "{p:?}");
    assert_eq!(p.duplicates_removed, 1);
    assert_eq!(p.matched + p.rejected_removed + p.flagged_removed + p.unreviewed_removed, 6);

    // Approved only is one change away, and says what it left out.
    let plan = selection::plan(&pool, &default.clone().approved_only(), 0.0).await.unwrap();
    let p = &plan.preview;
    assert_eq!(plan.samples.iter().map(|s| s.id).collect::<Vec<_>>(), vec![ids[0]]);
    assert_eq!((p.rejected_removed, p.flagged_removed, p.unreviewed_removed), (1, 2, 2), "{p:?}");

    // The export itself writes the same set, and its manifest carries the counts.
    let env = env();
    let spec = ExportSpec {
        selection: default,
        format: ExportFormat::default(),
        destination: Destination::Directory { path: "sets".into() },
    };
    let id = job::create(&pool, &spec, Some(ann.id), None).await.unwrap();
    assert_eq!(job::run(&pool, &env.storage, id).await.unwrap(), ExportStatus::Completed);
    let dir = env.root.join("exports/sets").join(format!("export-{id}"));
    let rows = std::fs::read_to_string(dir.join("train.jsonl")).unwrap();
    assert_eq!(rows.lines().count(), 2);
    assert!(
        !rows.contains("rejected answer") && !rows.contains("flagged answer") && !rows.contains("leftover")
    );
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["counts"]["selection"]["rejected_removed"], 1);
    assert_eq!(manifest["counts"]["selection"]["flagged_removed"], 2);
}

// (c) ---------------------------------------------------------------------------------------

struct Env {
    _dir: tempfile::TempDir,
    root: PathBuf,
    storage: Storage,
}

fn storage_at(root: &Path) -> Storage {
    let mut storage = Storage::new(vec![root.join("exports")], S3Options::default());
    storage.staging = root.join("staging");
    storage
}

fn env() -> Env {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("exports")).unwrap();
    Env { storage: storage_at(&root), root, _dir: dir }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect(),
        Err(_) => Vec::new(),
    };
    names.sort();
    names
}

/// A completed run of `n` distinct `ok` samples, written in a few statements.
async fn big_run(pool: &PgPool, n: i64) -> i64 {
    let dataset: i64 = sqlx::query_scalar(
        "INSERT INTO datasets (name, status, source, format, mapping, rows_imported)
         VALUES ('big', 'ready', '{\"kind\":\"test\"}', 'jsonl', '{\"schema\":\"openai\"}', $1) RETURNING id",
    )
    .bind(n)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO dataset_rows (dataset_id, row_key, messages, content_hash, category, turn_count, prompt_chars)
         SELECT $1, 'row-' || g, jsonb_build_array(jsonb_build_object('role', 'user', 'content', 'Question ' || g)),
                convert_to('h' || g, 'UTF8'), 'general', 1, 10
         FROM generate_series(1, $2) g",
    )
    .bind(dataset)
    .bind(n)
    .execute(pool)
    .await
    .unwrap();
    let run: i64 = sqlx::query_scalar(
        "INSERT INTO runs (name, dataset_id, status, settings, selection, sample_count, finished_at)
         VALUES ('big run', $1, 'completed', $2, '{\"mode\":\"all\"}', $3, now()) RETURNING id",
    )
    .bind(dataset)
    .bind(domain::stored::to_stored(&RunSettings::with_defaults(MODEL, vec![], 1024)))
    .bind(n as i32)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO samples (run_id, row_id, state, thinking, attempts, finish_reason, reasoning, content, messages,
                              prompt_tokens, completion_tokens, reasoning_tokens, finished_at)
         SELECT $1, r.id, 'ok', true, 1, 'stop', 'reasoning ' || r.id, repeat('an answer ', 100) || r.id,
                jsonb_build_array(r.messages -> 0, jsonb_build_object('role', 'assistant',
                    'content', repeat('an answer ', 100) || r.id, 'reasoning_content', 'reasoning ' || r.id)),
                10, 200, 5, now()
         FROM dataset_rows r WHERE r.dataset_id = $2",
    )
    .bind(run)
    .bind(dataset)
    .execute(pool)
    .await
    .unwrap();
    run
}

const CHILD_DATABASE: &str = "CURATION_CHILD_DATABASE_URL";
const CHILD_ROOT: &str = "CURATION_CHILD_ROOT";
const CHILD_LEASE_MS: u64 = 1_000;

/// The process the take-over tests start and kill: an export worker on the test's database.
#[tokio::test]
#[ignore = "started (and killed) as a child process by the export take-over tests"]
async fn export_worker_child_process() {
    let (Ok(url), Ok(root)) = (std::env::var(CHILD_DATABASE), std::env::var(CHILD_ROOT)) else { return };
    let pool = PgPool::connect(&url).await.unwrap();
    let options = JobOptions {
        lease: Duration::from_millis(CHILD_LEASE_MS),
        max_claims: 3,
        poll: Duration::from_millis(50),
    };
    runner::work(pool, Arc::new(storage_at(Path::new(&root))), options, CancellationToken::new()).await;
}

/// Kills the child when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// This test database's URL, for another process.
async fn database_url(pool: &PgPool) -> String {
    let name: String = sqlx::query_scalar("SELECT current_database()").fetch_one(pool).await.unwrap();
    let mut url = url::Url::parse(&std::env::var("DATABASE_URL").expect("DATABASE_URL is set")).unwrap();
    url.set_path(&name);
    url.to_string()
}

/// Starts an export worker process, waits until it is writing export `id` (rows written, the
/// staging folder present), and kills it with SIGKILL. Returns the staging folder.
async fn kill_mid_write(pool: &PgPool, env: &Env, id: i64) -> PathBuf {
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["export_worker_child_process", "--exact", "--ignored", "--test-threads=1"])
        .env(CHILD_DATABASE, database_url(pool).await)
        .env(CHILD_ROOT, &env.root)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut child = Killed(child);
    let staging = env.root.join(format!("exports/sets/.export-{id}.partial"));
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, done): (ExportStatus, i64) =
            sqlx::query_as("SELECT status, rows_done FROM exports WHERE id = $1")
                .bind(id)
                .fetch_one(pool)
                .await
                .unwrap();
        assert!(
            matches!(status, ExportStatus::Queued | ExportStatus::Running),
            "finished before the kill: {status}"
        );
        if status == ExportStatus::Running && done >= 512 && staging.exists() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child never got to writing ({status}, {done} rows)"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.0.kill().unwrap(); // SIGKILL: no cleanup runs in the child
    child.0.wait().unwrap();
    staging
}

async fn export_row(pool: &PgPool, id: i64) -> (ExportStatus, Option<String>, i32, Option<uuid::Uuid>) {
    sqlx::query_as("SELECT status, error, claims, lease_owner FROM exports WHERE id = $1")
        .bind(id)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn spec_into_sets(run: i64) -> ExportSpec {
    ExportSpec {
        selection: ExportSelection::for_runs(vec![run]),
        format: ExportFormat::default(),
        destination: Destination::Directory { path: "sets".into() },
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_export_killed_mid_write_is_finished_by_the_next_process_and_leaves_no_partial_files(
    pool: PgPool,
) {
    let run = big_run(&pool, 20_000).await;
    let env = env();
    let id = job::create(&pool, &spec_into_sets(run), None, None).await.unwrap();
    let staging = kill_mid_write(&pool, &env, id).await;
    let (status, _, claims, owner) = export_row(&pool, id).await;
    assert_eq!((status, claims), (ExportStatus::Running, 1));
    assert!(owner.is_some() && staging.exists(), "the dead process left its lease and its staging");

    // The next process takes it over once the lease has run out, and finishes it.
    let options = JobOptions { lease: Duration::from_millis(CHILD_LEASE_MS), ..Default::default() };
    let (me, stop) = (uuid::Uuid::new_v4(), CancellationToken::new());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let ran = loop {
        if let Some(ran) = runner::run_next(&pool, &env.storage, me, &options, &stop).await.unwrap() {
            break ran;
        }
        assert!(std::time::Instant::now() < deadline, "nobody took the export over");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(ran, (id, ExportStatus::Completed));
    let (status, error, claims, owner) = export_row(&pool, id).await;
    assert_eq!((status, error, claims, owner), (ExportStatus::Completed, None, 2, None));
    let sets = env.root.join("exports/sets");
    assert_eq!(entries(&sets), vec![format!("export-{id}")], "only the finished export, no partial folder");
    let rows = std::fs::read_to_string(sets.join(format!("export-{id}/train.jsonl"))).unwrap();
    assert_eq!(rows.lines().count(), 20_000);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_export_that_keeps_dying_is_failed_with_a_reason_and_leaves_nothing(pool: PgPool) {
    let run = big_run(&pool, 20_000).await;
    let env = env();
    let id = job::create(&pool, &spec_into_sets(run), None, None).await.unwrap();
    // This job has used its last start (it killed its process three times).
    sqlx::query("UPDATE exports SET claims = 2 WHERE id = $1").bind(id).execute(&pool).await.unwrap();
    let staging = kill_mid_write(&pool, &env, id).await;
    assert!(staging.exists());

    let options = JobOptions { lease: Duration::from_millis(CHILD_LEASE_MS), ..Default::default() };
    let (me, stop) = (uuid::Uuid::new_v4(), CancellationToken::new());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        assert_eq!(runner::run_next(&pool, &env.storage, me, &options, &stop).await.unwrap(), None);
        if export_row(&pool, id).await.0 != ExportStatus::Running {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the export was left running");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, error, _, owner) = export_row(&pool, id).await;
    assert_eq!((status, owner), (ExportStatus::Failed, None));
    let error = error.unwrap();
    assert!(
        error.contains("stopped before it finished, 3 times") && error.contains("Start the export again"),
        "{error}"
    );
    assert!(entries(&env.root.join("exports/sets")).is_empty(), "nothing partial is left in the destination");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn cancel_ends_a_queued_export_and_one_whose_process_died(pool: PgPool) {
    let run = finished_run(&pool, &[SeedSample::answered("q?", "r", "a")]).await;
    let env = env();
    let spec = spec_into_sets(run);

    let queued = job::create(&pool, &spec, None, None).await.unwrap();
    assert!(job::cancel(&pool, queued).await.unwrap());
    assert_eq!(export_row(&pool, queued).await.0, ExportStatus::Cancelled);
    assert!(!job::cancel(&pool, queued).await.unwrap(), "a finished export cannot be cancelled");

    // A process claimed this one and died: Cancel is recorded now and ends it once the lease
    // runs out, without anyone running it again.
    let orphan = job::create(&pool, &spec, None, None).await.unwrap();
    let dead = uuid::Uuid::new_v4();
    lease::claim_id(&pool, orphan, dead, Duration::from_millis(300), 3).await.unwrap().unwrap();
    assert!(job::cancel(&pool, orphan).await.unwrap());
    assert_eq!(export_row(&pool, orphan).await.0, ExportStatus::Running, "its lease is still live");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stop = CancellationToken::new();
    let options = JobOptions::default();
    assert_eq!(
        runner::run_next(&pool, &env.storage, uuid::Uuid::new_v4(), &options, &stop).await.unwrap(),
        None
    );
    assert_eq!(export_row(&pool, orphan).await.0, ExportStatus::Cancelled);

    // Cancel after the lease ran out ends it at once.
    let late = job::create(&pool, &spec, None, None).await.unwrap();
    lease::claim_id(&pool, late, dead, Duration::from_millis(1), 3).await.unwrap().unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(job::cancel(&pool, late).await.unwrap());
    assert_eq!(export_row(&pool, late).await.0, ExportStatus::Cancelled);
}

// (d) ---------------------------------------------------------------------------------------

/// Run settings as the first release stored them (`git show e42466b:domain/src/generation.rs`):
/// no `weight`, no `version`.
fn first_release_settings(endpoint: i64) -> serde_json::Value {
    serde_json::json!({
        "model": MODEL,
        "endpoint_ids": [endpoint],
        "max_tokens": 256,
        "temperature": null,
        "top_p": null,
        "seed": null,
        "system_prompt": null,
        "thinking": {"mode": "server_default"},
        "turns": "last_assistant",
        "concurrency": {"mode": "adaptive", "min": 4, "max": 512},
        "idle_timeout_secs": 5,
        "deadline_secs": null,
        "max_attempts": 5,
        "stream_interval": 16
    })
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_run_stored_with_an_older_settings_shape_still_runs(pool: PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let run = create_run(&pool, dataset(&pool, 6).await, settings(vec![endpoint]), by).await;
    sqlx::query("UPDATE runs SET settings = $2 WHERE id = $1")
        .bind(run)
        .bind(first_release_settings(endpoint))
        .execute(&pool)
        .await
        .unwrap();
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_exactly_one_result_each(&pool, run).await;
    assert_eq!(count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await, 6);

    // Changing it writes the current shape, with its version.
    let pass = RetryPass { states: vec![SampleState::Ok], max_attempts: Some(2), ..Default::default() };
    runs::retry(&pool, &http_client(), run, pass).await.unwrap();
    let stored: serde_json::Value = sqlx::query_scalar("SELECT settings FROM runs WHERE id = $1")
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((stored["version"].as_u64(), stored["weight"].as_u64()), (Some(2), Some(1)));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_preset_and_an_export_stored_by_the_first_release_are_read_and_run(pool: PgPool) {
    let run = finished_run(&pool, &[SeedSample::answered("q?", "r", "a")]).await;
    // `git show f14cb76:domain/src/export.rs`: no `excluded_flags`, no `version`.
    let old = serde_json::json!({
        "selection": {
            "run_ids": [run], "outcomes": ["ok"], "review": "all", "categories": [],
            "min_completion_tokens": null, "max_completion_tokens": null, "duplicates": "remove",
            "thinking": {"mode": "any"}, "seed": 42
        },
        "format": {"layout": "conversations", "file": "jsonl", "reasoning": "field", "tokenization": null, "validation_share": 0.0},
        "destination": {"kind": "directory", "path": "sets"}
    });
    sqlx::query("INSERT INTO export_presets (name, spec) VALUES ('old', $1)")
        .bind(&old)
        .execute(&pool)
        .await
        .unwrap();
    let presets = engine::export::store::presets(&pool).await.unwrap();
    assert_eq!(presets[0].spec.selection.review, ReviewFilter::All, "an old preset keeps its meaning");
    assert!(presets[0].spec.selection.excluded_flags.is_empty());

    let id: i64 = sqlx::query_scalar("INSERT INTO exports (spec) VALUES ($1) RETURNING id")
        .bind(&old)
        .fetch_one(&pool)
        .await
        .unwrap();
    let env = env();
    assert_eq!(job::run(&pool, &env.storage, id).await.unwrap(), ExportStatus::Completed);

    // A spec written by a newer release is refused with what to do, not misread.
    let mut newer = old.clone();
    newer["version"] = 99.into();
    let id: i64 = sqlx::query_scalar("INSERT INTO exports (spec) VALUES ($1) RETURNING id")
        .bind(&newer)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(job::run(&pool, &env.storage, id).await.unwrap(), ExportStatus::Failed);
    let (_, error, _, _) = export_row(&pool, id).await;
    assert!(error.unwrap().contains("newer Draft Studio"));
}

// Item 5: provenance ----------------------------------------------------------------------

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_manifest_records_sources_endpoints_tokenizer_reviewers_and_filters(pool: PgPool) {
    use sha2::{Digest, Sha256};
    let sim = sim(fast_sim()).await;
    let ann = person(&pool, "ann", Role::Engineer).await;
    let endpoint = endpoint(&pool, &sim, ann.id).await;
    let dataset = dataset(&pool, 3).await;
    sqlx::query(
        "UPDATE datasets SET source = '{\"kind\":\"hub\",\"repo\":\"org/chats\",\"config\":\"default\",\"split\":\"train\"}'
         WHERE id = $1",
    )
    .bind(dataset)
    .execute(&pool)
    .await
    .unwrap();
    let run = create_run(&pool, dataset, settings(vec![endpoint]), ann.id).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let ids = ids_of(&pool, run).await;
    decide(&pool, &ann, ids[0], Decision::Approve, &[]).await;
    decide(&pool, &ann, ids[1], Decision::Reject, &[]).await;

    let env = env();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/tokenizers/qwen");
    std::fs::create_dir_all(env.root.join("exports/tokenizers")).unwrap();
    for file in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(fixtures.join(file), env.root.join("exports/tokenizers").join(file)).unwrap();
    }
    let mut spec = spec_into_sets(run);
    spec.format.layout = Layout::Tokenized;
    spec.format.tokenization = Some(Tokenization {
        tokenizer_dir: "tokenizers".into(),
        max_length: 4096,
        overlong: Overlong::Drop,
        source: TokenSource::Retokenize,
        turn_rows: TurnRows::PerConversation,
        turn_end: TurnEnd::AsSampled,
    });
    let id = job::create(&pool, &spec, Some(ann.id), None).await.unwrap();
    let status = job::run(&pool, &env.storage, id).await.unwrap();
    let record = engine::export::store::get(&pool, id).await.unwrap();
    assert_eq!(status, ExportStatus::Completed, "{:?}", record.error);
    let manifest: engine::export::manifest::Manifest =
        serde_json::from_value(record.manifest.unwrap()).unwrap();
    let p = &manifest.provenance;

    // The dataset: its hub source and a hash of its rows' content hashes in import order.
    let hashes: Vec<Vec<u8>> =
        sqlx::query_scalar("SELECT content_hash FROM dataset_rows WHERE dataset_id = $1 ORDER BY id")
            .bind(dataset)
            .fetch_all(&pool)
            .await
            .unwrap();
    let expected = hex::encode(Sha256::digest(hashes.concat()));
    assert_eq!(p.datasets.len(), 1);
    assert_eq!(p.datasets[0].content_sha256, expected);
    let hub = p.datasets[0].hub.as_ref().unwrap();
    assert_eq!(
        (hub.repo.as_str(), hub.config.as_str(), hub.split.as_str()),
        ("org/chats", "default", "train")
    );

    // The endpoint as it served the run.
    assert_eq!(p.endpoints.len(), 1);
    let e = &p.endpoints[0];
    assert_eq!((e.run_id, e.endpoint_id, e.served_model.as_deref()), (run, endpoint, Some(MODEL)));
    assert!(e.server_version.as_deref().is_some_and(|v| v.starts_with("vllm-sim-")), "{e:?}");
    assert_eq!(manifest.runs[0].settings["model"], MODEL);

    // The tokenizer and template hashes.
    let t = p.tokenizer.as_ref().unwrap();
    assert_eq!(
        t.tokenizer_sha256,
        hex::encode(Sha256::digest(std::fs::read(fixtures.join("tokenizer.json")).unwrap()))
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures.join("tokenizer_config.json")).unwrap()).unwrap();
    let template = config["chat_template"].as_str().unwrap();
    assert_eq!(t.template_sha256, hex::encode(Sha256::digest(template.as_bytes())));

    // Reviewers of what was exported, and what each filter removed.
    assert_eq!(p.reviewers.len(), 1);
    assert_eq!((p.reviewers[0].reviewer.as_str(), p.reviewers[0].approved, p.unreviewed), ("ann", 1, 1));
    let rejected = p.filters.iter().find(|f| f.filter == "review: rejected").unwrap();
    assert_eq!((rejected.setting.as_str(), rejected.removed), ("not_rejected_or_flagged", 1));
}
