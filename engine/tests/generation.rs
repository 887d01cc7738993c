//! The generation engine against the vLLM simulator: outcomes, retries, leases, run control
//! and validation. Outages are in `outages.rs`, the tests judged by timing in `timing.rs`.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::generation::{Concurrency, RunSettings, SampleState, Thinking};
use engine::runs::{self, Control, RetryPass};
use engine::testing::*;
use engine::vllm::http_client;
use std::time::Duration;
use vllm_sim::{FaultSettings, RunningSim};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// What the simulator's `http_500_if_prompt_contains` fault looks for.
const POISON: &str = "[poison]";

/// A dataset of `poisoned` questions the server always fails on, then `fine` ones it answers.
async fn poisoned_dataset(pool: &sqlx::PgPool, poisoned: usize, fine: usize) -> i64 {
    let questions: Vec<String> = (0..poisoned)
        .map(|i| format!("Question {i} {POISON}: this one always fails."))
        .chain((0..fine).map(|i| format!("Question {i}: explain topic number {i}, please.")))
        .collect();
    dataset_of(pool, &questions).await
}

fn poison_faults() -> FaultSettings {
    FaultSettings { http_500_if_prompt_contains: Some(POISON.to_string()), ..Default::default() }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_run_generates_every_sample_and_keeps_reasoning_and_answer(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 40).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    assert_exactly_one_result_each(&pool, run).await;
    let ok = count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await;
    assert_eq!(ok, 40, "{:?}", state_counts(&pool, run).await);
    let complete = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND content <> '' AND reasoning <> ''
           AND finish_reason = 'stop' AND completion_tokens > 0 AND prompt_tokens > 0 AND ttft_ms IS NOT NULL
           AND messages -> -1 ->> 'role' = 'assistant' AND messages -> -1 ->> 'reasoning_content' = reasoning",
        run,
    )
    .await;
    assert_eq!(complete, 40);
    // The old answer was replaced: the conversation sent was the question alone.
    let sent_old = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND messages::text LIKE '%an old answer%'",
        run,
    )
    .await;
    assert_eq!(sent_old, 0);
    let generated = sim.stats();
    assert_eq!(generated.requests_finished.stop, 40, "{generated:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_cut_answer_is_truncated_not_retried_and_keeps_what_came_back(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.lengths.median_completion_tokens = 200;
    config.lengths.completion_sigma = 0.1;
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 10).await;
    let mut s = settings(vec![endpoint]);
    s.max_tokens = 20; // inside the reasoning part of every answer
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let truncated = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'truncated' AND finish_reason = 'length'
           AND attempts = 1 AND reasoning <> '' AND coalesce(content, '') = ''",
        run,
    )
    .await;
    assert_eq!(truncated, 10, "{:?}", state_counts(&pool, run).await);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn transient_faults_are_retried_and_every_try_is_recorded(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.faults =
        FaultSettings { http_500: 0.2, stream_error: 0.1, drop_connection: 0.1, ..Default::default() };
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 40).await;
    let mut s = settings(vec![endpoint]);
    s.max_attempts = 12;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(120)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    assert_exactly_one_result_each(&pool, run).await;
    let ok = count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await;
    assert_eq!(ok, 40, "{:?}", state_counts(&pool, run).await);
    let kinds: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT error_kind FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.counted AND a.error_kind IS NOT NULL ORDER BY 1",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(kinds, ["disconnected", "error_chunk", "http"], "every fault kind was seen and retried");
    let retried = count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND attempts > 1", run).await;
    assert!(retried > 0);
    let errors_with_status = count(
        &pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.error_kind = 'http' AND a.http_status = 500 AND a.error LIKE 'HTTP 500%'",
        run,
    )
    .await;
    assert!(errors_with_status > 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_bad_request_fails_at_once_with_the_servers_message(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.max_model_len = 40; // every prompt + max_tokens is too long
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 5).await;
    let mut s = settings(vec![endpoint]);
    s.max_tokens = 30;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let failed = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'failed' AND attempts = 1
           AND error LIKE 'HTTP 400:%maximum context length%'",
        run,
    )
    .await;
    assert_eq!(failed, 5, "{:?}", state_counts(&pool, run).await);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_idle_stream_times_out_and_keeps_its_partial_text(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.time_scale = 1.0;
    config.engine.per_seq_tokens_per_s = 200.0;
    config.faults = FaultSettings { stall: 1.0, stall_ms: 4_000, ..Default::default() };
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 3).await;
    let mut s = settings(vec![endpoint]);
    s.idle_timeout_secs = 1;
    s.max_attempts = 2;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let timed_out = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'timed_out' AND attempts = 2
           AND reasoning <> '' AND error LIKE 'no token for 1 s%'",
        run,
    )
    .await;
    assert_eq!(timed_out, 3, "{:?}", state_counts(&pool, run).await);
    let partials = count(
        &pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.result = 'timed_out' AND a.partial_reasoning <> ''",
        run,
    )
    .await;
    assert_eq!(partials, 6);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn two_workers_share_a_run_without_ever_working_the_same_sample(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.time_scale = 10.0;
    config.engine.per_seq_tokens_per_s = 40.0;
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 80).await;
    let mut s = settings(vec![endpoint]);
    s.concurrency = Concurrency::Fixed { limit: 16 };
    let run = create_run(&pool, dataset, s, by).await;
    let (stop_a, worker_a) = start_worker(&pool);
    let (stop_b, worker_b) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(120)).await;
    stop_a.cancel();
    stop_b.cancel();
    worker_a.await.unwrap().unwrap();
    worker_b.await.unwrap().unwrap();
    assert_exactly_one_result_each(&pool, run).await;
    let tries = count(
        &pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id WHERE s.run_id = $1",
        run,
    )
    .await;
    assert_eq!(tries, 80, "one try per sample: no sample was generated twice");
    let workers = count(
        &pool,
        "SELECT count(DISTINCT worker_id) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id WHERE s.run_id = $1",
        run,
    )
    .await;
    assert_eq!(workers, 2, "both workers took part");
    assert!(sim.stats().running <= 16, "the fixed limit is shared, not doubled");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_dead_workers_leases_expire_and_another_worker_finishes_its_samples(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 30).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    // A worker claims ten samples and dies before doing anything with them.
    let dead = uuid::Uuid::new_v4();
    let claimed =
        engine::generation::queue::claim(&pool, run, dead, Duration::from_secs(1), 10).await.unwrap();
    assert_eq!(claimed.len(), 10);
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_exactly_one_result_each(&pool, run).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await,
        30
    );
    let reaped = count(
        &pool,
        &format!(
            "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
             WHERE s.run_id = $1 AND a.worker_id = '{dead}' AND a.error_kind = 'lease_expired' AND NOT a.counted"
        ),
        run,
    )
    .await;
    assert_eq!(reaped, 10);
    let counted = count(&pool, "SELECT sum(attempts) FROM samples WHERE run_id = $1", run).await;
    assert_eq!(counted, 30, "the dead worker's tries do not count against the samples");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn pause_resume_and_cancel_change_what_workers_do(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.time_scale = 5.0;
    config.engine.per_seq_tokens_per_s = 40.0; // about 0.25 s per request
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 80).await;
    let mut s = settings(vec![endpoint]);
    s.concurrency = Concurrency::Fixed { limit: 4 };
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(
        runs::control(&pool, run, Control::Pause).await.unwrap(),
        domain::generation::RunStatus::Paused
    );
    // Tries in flight finish; nothing new starts.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let running =
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'running'", run).await;
    assert_eq!(running, 0, "tries in flight finished and the samples claimed ahead went back");
    let abandoned = abandoned_tries(&pool, run).await;
    assert_eq!(abandoned, 0, "a sample claimed ahead but never sent records no try");
    let done_while_paused =
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await,
        done_while_paused
    );
    let err = runs::control(&pool, run, Control::Pause).await.unwrap_err().to_string();
    assert!(err.contains("the run is paused; it cannot be paused"), "{err}");

    runs::control(&pool, run, Control::Resume).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await
            > done_while_paused
    );

    runs::control(&pool, run, Control::Cancel).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'running'", run).await,
        0
    );
    assert!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'pending'", run).await > 0
    );
    stop.cancel();
    worker.await.unwrap().unwrap();
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_retry_pass_requeues_failures_with_new_settings_and_keeps_history(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.faults = poison_faults();
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = poisoned_dataset(&pool, 3, 3).await;
    let mut s = settings(vec![endpoint]);
    s.max_attempts = 1;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'failed'", run).await,
        3,
        "{:?}",
        state_counts(&pool, run).await
    );

    sim.set_faults(FaultSettings::default()).unwrap();
    let requeued = runs::retry(
        &pool,
        &http_client(),
        run,
        RetryPass {
            idle_timeout_secs: Some(300),
            concurrency: Some(Concurrency::Fixed { limit: 2 }),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    assert_eq!(requeued, 3);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_eq!(count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await, 6);
    let history = count(
        &pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id WHERE s.run_id = $1 AND a.counted",
        run,
    )
    .await;
    assert_eq!(history, 9, "the failed tries stay in the history");
    let settings: serde_json::Value = sqlx::query_scalar("SELECT settings FROM runs WHERE id = $1")
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(settings["idle_timeout_secs"], 300);
    let err = runs::retry(&pool, &http_client(), run, RetryPass::default()).await.unwrap_err().to_string();
    assert!(err.contains("no sample matches"), "{err}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_retry_pass_refuses_max_tokens_the_server_cannot_hold(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.max_model_len = 2048;
    // Every sample fails on its own (the server answers its probes): the run still ends.
    config.faults = poison_faults();
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = poisoned_dataset(&pool, 3, 0).await;
    let mut s = settings(vec![endpoint]);
    s.max_tokens = 512;
    s.max_attempts = 1;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    let pass = |max_tokens| RetryPass { max_tokens: Some(max_tokens), ..Default::default() };
    let err = runs::retry(&pool, &http_client(), run, pass(4096)).await.unwrap_err().to_string();
    assert!(err.contains("max_tokens 4096 leaves no room for the prompt") && err.contains("2048"), "{err}");
    // Nothing changed: the samples are still failed and the run keeps its settings.
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'failed'", run).await,
        3
    );
    let stored: serde_json::Value = sqlx::query_scalar("SELECT settings FROM runs WHERE id = $1")
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored["max_tokens"], 512);
    // Within the limit it goes through.
    assert_eq!(runs::retry(&pool, &http_client(), run, pass(1024)).await.unwrap(), 3);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn invalid_settings_are_refused_with_every_reason(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.max_model_len = 2048;
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 3).await;
    let mut s = settings(vec![endpoint]);
    s.max_tokens = 4096;
    s.temperature = Some(-1.0);
    let err = runs::create(
        &pool,
        &engine::vllm::http_client(),
        runs::NewRun {
            name: "x".into(),
            dataset_id: dataset,
            selection: domain::generation::Selection::All,
            settings: s,
            draft: None,
            trained_on: None,
        },
        by,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("max_tokens 4096 leaves no room for the prompt"), "{err}");
    assert!(err.contains("max_model_len 2048"), "{err}");
    assert!(err.contains("temperature must be between 0 and 2"), "{err}");

    let mut wrong_model = settings(vec![endpoint]);
    wrong_model.model = "llama".into();
    let err = runs::create(
        &pool,
        &engine::vllm::http_client(),
        runs::NewRun {
            name: "x".into(),
            dataset_id: dataset,
            selection: domain::generation::Selection::All,
            settings: wrong_model,
            draft: None,
            trained_on: None,
        },
        by,
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("does not serve `llama`; it serves sim-model"), "{err}");
    assert_eq!(count(&pool, "SELECT count(*) FROM runs WHERE $1 = $1", 0).await, 0, "nothing was created");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_thinking_mix_is_fixed_per_sample_and_reaches_the_template(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 40).await;
    let mut s = settings(vec![endpoint]);
    s.thinking = Thinking::Mix { on_ratio: 0.5 };
    s.seed = Some(7);
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let thinking = count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND thinking", run).await;
    assert!((10..=30).contains(&thinking), "about half think: {thinking}");
    let mismatched = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND (thinking <> (coalesce(reasoning, '') <> ''))",
        run,
    )
    .await;
    assert_eq!(mismatched, 0, "samples without thinking came back without reasoning");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn adaptive_concurrency_grows_to_fill_the_server_and_says_why(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.time_scale = 10.0;
    config.engine.max_num_seqs = 160; // more than the adaptive start of 64
    config.engine.per_seq_tokens_per_s = 50.0; // about a second per request at 10x
    config.lengths.median_completion_tokens = 300;
    config.lengths.completion_cap = 600;
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 4000).await;
    let mut s = settings(vec![endpoint]);
    s.concurrency = Concurrency::Adaptive { min: 2, max: 600 };
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (limit, reason): (i32, String) = sqlx::query_as(
        "SELECT concurrency_limit, limit_reason FROM endpoint_capacity WHERE endpoint_id = $1",
    )
    .bind(endpoint)
    .fetch_one(&pool)
    .await
    .unwrap();
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert!(
        (150..=220).contains(&limit),
        "limit {limit} ({reason}) should settle near the server's 160 slots"
    );
    // Why: the server's batch ("160 running, ...") or an increase that did not pay.
    assert!(reason.contains("running") || reason.contains("generation rate"), "{reason}");
    let recorded = count(
        &pool,
        "SELECT count(*) FROM run_metrics WHERE run_id = $1 AND server_running IS NOT NULL",
        run,
    )
    .await;
    assert!(recorded >= 3, "per-second metrics recorded: {recorded}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn without_server_metrics_the_run_still_adapts_and_completes(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.no_metrics = true;
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 30).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await,
        30
    );
    let reason: String = sqlx::query_scalar("SELECT limit_reason FROM run_endpoints WHERE run_id = $1")
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(reason.contains("no /metrics") || reason.starts_with("starting value"), "{reason}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn every_assistant_turn_is_regenerated_in_order(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset_of_conversations(&pool, &[two_turns("first question", "second question")]).await;
    let mut s = settings(vec![endpoint]);
    s.turns = domain::generation::TurnMode::EveryAssistant;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let stored: serde_json::Value = sqlx::query_scalar("SELECT messages FROM samples WHERE run_id = $1")
        .bind(run)
        .fetch_one(&pool)
        .await
        .unwrap();
    let roles: Vec<&str> = stored.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
    assert!(!stored.to_string().contains("old answer"), "both old answers are regenerated: {stored}");
    assert_eq!(sim.stats().requests_finished.stop, 2, "two requests, one per assistant turn");
    let _ = SampleState::Ok;
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn nul_characters_in_model_output_are_stored_rather_than_refused(pool: sqlx::PgPool) {
    use engine::generation::queue::{self, Next, Output, TryRecord};
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let run = create_run(&pool, dataset(&pool, 2).await, settings(vec![endpoint]), by).await;
    // No worker runs: this test plays the worker's part.
    let worker = uuid::Uuid::new_v4();
    let claimed = queue::claim(&pool, run, worker, Duration::from_secs(60), 2).await.unwrap();
    // A real vLLM server sent these: PostgreSQL refuses U+0000 in text and jsonb.
    let output = Output {
        reasoning: Some("think\0ing".into()),
        content: Some("ans\0wer".into()),
        messages: Some(serde_json::json!([{"role": "assistant", "content": "ans\0wer"}])),
        ..Default::default()
    };
    let record = TryRecord { result: "ok", partial_content: Some("a\0".into()), ..Default::default() };
    let settled = queue::settle(&pool, claimed[0].id, worker, Next::Finish(SampleState::Ok), output, record)
        .await
        .unwrap();
    assert!(settled);
    let (reasoning, content, message): (String, String, String) =
        sqlx::query_as("SELECT reasoning, content, messages->0->>'content' FROM samples WHERE id = $1")
            .bind(claimed[0].id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (reasoning.as_str(), content.as_str(), message.as_str()),
        ("think\u{FFFD}ing", "ans\u{FFFD}wer", "ans\u{FFFD}wer")
    );

    // A try that cannot be recorded at all ends the sample as failed instead of leaving it
    // running under a lease its worker keeps renewing.
    assert!(queue::fail_unrecorded(&pool, claimed[1].id, worker, "the database refused it").await.unwrap());
    let (state, error, lease): (SampleState, String, Option<uuid::Uuid>) =
        sqlx::query_as("SELECT state, error, lease_owner FROM samples WHERE id = $1")
            .bind(claimed[1].id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(state, SampleState::Failed);
    assert!(error.contains("could not be stored: the database refused it"), "{error}");
    assert_eq!(lease, None);
    assert!(queue::renew_leases(&pool, worker, Duration::from_secs(60), &[claimed[1].id])
        .await
        .unwrap()
        .is_empty());
    assert!(!queue::fail_unrecorded(&pool, claimed[1].id, worker, "again").await.unwrap());
}

/// vLLM renders every metric it has on each `/metrics` request, in the API process that also
/// streams the answers: a run at a fixed limit reads it every few ticks (its live view, its
/// chunk size and the Endpoints page need no more), an adaptive run every tick (its controller
/// judges each reading).
#[sqlx::test(migrator = "MIGRATOR")]
async fn the_server_is_scraped_every_tick_only_for_an_adaptive_limit(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.time_scale = 1.0;
    config.engine.per_seq_tokens_per_s = 50.0; // answers of about a second: the run lasts
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let mut scrapes = Vec::new();
    // Small limits: the test is about reading the server, and runs beside the others.
    for concurrency in [Concurrency::Fixed { limit: 2 }, Concurrency::Adaptive { min: 2, max: 4 }] {
        let dataset = dataset(&pool, 100).await;
        let mut s = settings(vec![endpoint]);
        s.concurrency = concurrency;
        let run = create_run(&pool, dataset, s, by).await;
        let before = sim.stats().metrics_scrapes;
        let (stop, worker) = start_worker(&pool);
        // 20 ticks of 200 ms.
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.cancel();
        worker.await.unwrap().unwrap();
        scrapes.push(sim.stats().metrics_scrapes - before);
        let seconds = count(&pool, "SELECT count(*) FROM run_metrics WHERE run_id = $1", run).await;
        let with_load = count(
            &pool,
            "SELECT count(*) FROM run_metrics WHERE run_id = $1 AND server_running IS NOT NULL
                 AND server_generation_tps IS NOT NULL",
            run,
        )
        .await;
        // A rate needs two readings, a second apart at a fixed limit: the first two seconds
        // may pass without one; every later second carries one.
        assert!(
            seconds >= 4 && with_load >= seconds - 2,
            "{concurrency:?}: {with_load} of {seconds} seconds show the server's load"
        );
        if matches!(concurrency, Concurrency::Fixed { .. }) {
            // No controller stores a fixed-only endpoint's load with a limit: its readings are
            // stored as they come, for the Endpoints page.
            let observed = count(
                &pool,
                "SELECT count(*) FROM endpoint_capacity WHERE endpoint_id = $1
                     AND observed_at > now() - interval '3 seconds'
                     AND server_running IS NOT NULL AND server_generation_tps IS NOT NULL",
                endpoint,
            )
            .await;
            assert_eq!(observed, 1, "the Endpoints page has a recent reading of a fixed-only server");
        }
        runs::control(&pool, run, Control::Cancel).await.unwrap();
    }
    let (fixed, adaptive) = (scrapes[0], scrapes[1]);
    assert!((3..=6).contains(&fixed), "a fixed limit scraped {fixed} times in 20 ticks");
    assert!(adaptive >= 17, "an adaptive limit scraped {adaptive} times in 20 ticks");
}

/// A simulator whose requests generate 100 tokens/s each and answer in about half a second,
/// an endpoint on it, and settings for four at a time with the default idle timeout (long
/// chunks keep a request seen alive).
async fn half_second_answers(pool: &sqlx::PgPool) -> (RunningSim, i64, i64, RunSettings) {
    let mut config = fast_sim();
    config.time_scale = 1.0;
    config.engine.per_seq_tokens_per_s = 100.0;
    config.lengths.median_completion_tokens = 50;
    config.lengths.completion_sigma = 0.2;
    config.lengths.completion_cap = 100;
    let sim = sim(config).await;
    let by = user(pool).await;
    let endpoint = endpoint(pool, &sim, by).await;
    let mut s = settings(vec![endpoint]);
    s.concurrency = Concurrency::Fixed { limit: 4 };
    s.idle_timeout_secs = 120;
    (sim, endpoint, by, s)
}

/// Every streamed chunk costs the server's API process; the engine asks for a chunk every few
/// seconds per request once it knows how fast requests generate, and its own streams tell that
/// from the first requests' second chunks, long before two scrapes of `/metrics` would.
#[sqlx::test(migrator = "MIGRATOR")]
async fn only_the_first_requests_stream_small_chunks(pool: sqlx::PgPool) {
    let (sim, _, by, s) = half_second_answers(&pool).await;
    let floor = s.stream_interval;
    // Ten waves of four.
    let run = create_run(&pool, dataset(&pool, 40).await, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let intervals = sim.stats().stream_intervals;
    let small = intervals.get(&floor).copied().unwrap_or(0);
    // 100 tokens/s a request: a chunk every few seconds is the longest interval the engine
    // asks for (256 tokens, `chunking::LONGEST_INTERVAL`).
    let large = intervals.get(&256).copied().unwrap_or(0);
    assert_eq!(intervals.values().sum::<u64>(), 40, "{intervals:?}");
    assert!(small <= 5, "only the first wave (4) streams at the run's {floor} tokens a chunk: {intervals:?}");
    assert!(large >= 35, "the rest at 256 tokens a chunk: {intervals:?}");
}

/// The endpoint keeps its streams' pace: a later run, driven by a new worker process (as after
/// a restart), asks for long chunks from its first request.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_later_run_starts_with_the_pace_the_last_one_left(pool: sqlx::PgPool) {
    let (sim, endpoint, by, s) = half_second_answers(&pool).await;
    let floor = s.stream_interval;
    for samples in [12, 20] {
        let run = create_run(&pool, dataset(&pool, samples).await, s.clone(), by).await;
        let (stop, worker) = start_worker(&pool);
        wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
        stop.cancel();
        worker.await.unwrap().unwrap();
    }
    let stored: Option<f32> =
        sqlx::query_scalar("SELECT stream_tps FROM endpoint_capacity WHERE endpoint_id = $1")
            .bind(endpoint)
            .fetch_one(&pool)
            .await
            .unwrap();
    let stored = stored.expect("the first run stored its pace");
    assert!((40.0..=150.0).contains(&stored), "about 100 tokens/s a request: {stored}");
    let intervals = sim.stats().stream_intervals;
    assert_eq!(intervals.values().sum::<u64>(), 32, "{intervals:?}");
    assert!(
        intervals.get(&floor).copied().unwrap_or(0) <= 5,
        "only the first run's first wave (4) streams at the run's {floor} tokens a chunk: {intervals:?}"
    );
    assert!(intervals.get(&256).copied().unwrap_or(0) >= 27, "{intervals:?}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn only_samples_being_worked_on_keep_their_leases(pool: sqlx::PgPool) {
    use engine::generation::queue;
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let run = create_run(&pool, dataset(&pool, 2).await, settings(vec![endpoint]), by).await;
    // No worker runs: this test plays the worker's part.
    let worker = uuid::Uuid::new_v4();
    let claimed = queue::claim(&pool, run, worker, Duration::from_secs(1), 2).await.unwrap();
    let (working, unrecorded) = (claimed[0].id, claimed[1].id);
    // The second sample's try ended but could not be recorded: the worker no longer holds it.
    let renewed = queue::renew_leases(&pool, worker, Duration::from_secs(1), &[working]).await.unwrap();
    assert_eq!(renewed, vec![working]);
    tokio::time::sleep(Duration::from_millis(600)).await;
    queue::renew_leases(&pool, worker, Duration::from_secs(1), &[working]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!(queue::reap_expired_leases(&pool).await.unwrap(), 1);
    let states: Vec<(i64, String)> =
        sqlx::query_as("SELECT id, state::text FROM samples WHERE run_id = $1 ORDER BY id")
            .bind(run)
            .fetch_all(&pool)
            .await
            .unwrap();
    let state_of = |id| states.iter().find(|s| s.0 == id).unwrap().1.clone();
    assert_eq!(state_of(working), "running", "still leased by the worker working on it");
    assert_eq!(state_of(unrecorded), "pending", "back in the queue for any worker");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_servers_token_ids_are_kept_for_every_answer(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 12).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    type Row = (i64, Option<bool>, i32, i32, Vec<u8>, Vec<u8>, serde_json::Value);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT s.id, s.captured_token_ids, s.prompt_tokens, s.completion_tokens, t.prompt_ids, t.completion_ids, r.messages
         FROM samples s JOIN sample_tokens t ON t.sample_id = s.id AND t.turn = 0 JOIN dataset_rows r ON r.id = s.row_id
         WHERE s.run_id = $1",
    )
    .bind(run)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 12);
    let http = http_client();
    for (id, captured, prompt_tokens, completion_tokens, prompt, completion, messages) in rows {
        assert_eq!(captured, Some(true), "sample {id}");
        let prompt = engine::generation::token_ids::unpack(&prompt).unwrap();
        let completion = engine::generation::token_ids::unpack(&completion).unwrap();
        assert_eq!(prompt.len() as i32, prompt_tokens);
        assert_eq!(completion.len() as i32, completion_tokens);
        // The prompt's ids are the server's own tokenization of the conversation it was sent.
        let sent = serde_json::json!([messages[0]]);
        let tokenized: serde_json::Value = http
            .post(format!("{}/tokenize", sim.base_url()))
            .json(&serde_json::json!({"messages": sent, "add_generation_prompt": true}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let expected: Vec<u32> =
            tokenized["tokens"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        assert_eq!(prompt, expected, "sample {id}");
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_server_without_token_ids_still_works_and_the_samples_say_so(pool: sqlx::PgPool) {
    let mut config = fast_sim();
    config.ignore_return_token_ids = true;
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 6).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(30)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let without = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok' AND captured_token_ids = false",
        run,
    )
    .await;
    assert_eq!(without, 6);
    let rows = count(
        &pool,
        "SELECT count(*) FROM sample_tokens t JOIN samples s ON s.id = t.sample_id WHERE s.run_id = $1",
        run,
    )
    .await;
    assert_eq!(rows, 0);
}
