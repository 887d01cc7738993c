//! The run dashboard's figures against a real run on the simulator: counts, rates, history,
//! bias, alerts, the runs list, and the live hub's one-publisher-per-run sharing.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::{dashboard::AlertKind, generation::RunStatus};
use engine::{
    dashboard::{alerts, bias, list, series, snapshot, AlertPolicy, LiveHub},
    testing::*,
};
use std::{sync::Arc, time::Duration};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_finished_run_adds_up_everywhere_the_dashboard_looks(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 60).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    // The driver records its last second after the run completes; let it land.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();

    let snap = snapshot::full(&pool, run, &AlertPolicy::default()).await.unwrap();
    assert_eq!(snap.status, RunStatus::Completed);
    assert_eq!(snap.counts.total(), 60);
    assert_eq!(snap.counts.ok, 60);
    assert_eq!(snap.completion.count, 60);
    let (mean, p50, p95) =
        (snap.completion.mean.unwrap(), snap.completion.p50.unwrap(), snap.completion.p95.unwrap());
    assert!(mean > 0.0 && p50 > 0.0 && p95 >= p50, "{:?}", snap.completion);
    assert_eq!(snap.attempts, vec![(1, 60)]);
    assert_eq!(snap.endpoints.len(), 1);
    assert!(snap.errors.is_empty());
    assert!(snap.alerts.is_empty(), "{:?}", snap.alerts);
    assert_eq!(snap.eta_secs, None, "a finished run has no ETA");

    // The history holds every completed sample and every token the workers received.
    let history = series::history(&pool, run).await.unwrap();
    assert!(!history.is_empty());
    let completed: f64 = history.iter().map(|p| p.completed * f64::from(p.seconds)).sum();
    assert_eq!(completed.round() as i64, 60, "{history:?}");
    let tokens: f64 = history.iter().map(|p| p.client_tps * f64::from(p.seconds)).sum();
    let stored: i64 =
        count(&pool, "SELECT COALESCE(sum(completion_tokens), 0) FROM samples WHERE run_id = $1", run).await;
    assert_eq!(tokens.round() as i64, stored);

    let report = bias::report(&pool, run).await.unwrap();
    assert_eq!(report.failure_rate, 0.0);
    assert_eq!(report.completion_bands.iter().map(|b| b.counts.ok).sum::<i64>(), 60);
    assert_eq!(report.prompt_bands.iter().map(|b| b.counts.ok).sum::<i64>(), 60);
    assert_eq!(report.reasoning_bands.iter().map(|b| b.counts.ok).sum::<i64>(), 60);
    assert_eq!(report.reasoning_bands[0].label, "no reasoning");
    let categories: Vec<_> = report.categories.iter().map(|c| (c.category.as_str(), c.counts.ok)).collect();
    assert_eq!(categories, vec![("even", 30), ("odd", 30)]);
    assert!(report.warnings.is_empty());

    let runs = list::list(&pool, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].counts.ok, 60);
    assert!(!runs[0].sparkline.is_empty());
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn failures_concentrated_in_one_category_are_called_out(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let questions: Vec<String> = (0..40).map(|i| format!("question {i}")).collect();
    let dataset = dataset_of(&pool, &questions).await;
    let sim = sim(fast_sim()).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    // Settle the samples by hand: every `odd` row timed out, every `even` one is ok.
    sqlx::query(
        "UPDATE samples s SET state = CASE WHEN r.category = 'odd' THEN 'timed_out'::sample_state ELSE 'ok' END,
                finished_at = now(), completion_tokens = 100, attempts = 1
         FROM dataset_rows r WHERE r.id = s.row_id AND s.run_id = $1",
    )
    .bind(run)
    .execute(&pool)
    .await
    .unwrap();
    let report = bias::report(&pool, run).await.unwrap();
    assert_eq!(report.failure_rate, 0.5);
    // 100% against 50% is twice the run's rate: called out; `even` is not.
    assert!(
        report.warnings.iter().any(|w| w.starts_with("Category `odd` fail 100%")),
        "{:?}",
        report.warnings
    );
    assert!(!report.warnings.iter().any(|w| w.contains("`even`")));
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_run_losing_its_long_reasoning_traces_is_called_out_by_reasoning_length(pool: sqlx::PgPool) {
    let by = user(&pool).await;
    let questions: Vec<String> = (0..40).map(|i| format!("question {i}")).collect();
    let dataset = dataset_of(&pool, &questions).await;
    let sim = sim(fast_sim()).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    // Short traces end ok; every long one timed out (as a client timeout kills them).
    sqlx::query(
        "UPDATE samples s SET state = CASE WHEN r.category = 'odd' THEN 'timed_out'::sample_state ELSE 'ok' END,
                reasoning_tokens = CASE WHEN r.category = 'odd' THEN 3000 ELSE 100 END,
                finished_at = now(), completion_tokens = 100, attempts = 1
         FROM dataset_rows r WHERE r.id = s.row_id AND s.run_id = $1",
    )
    .bind(run)
    .execute(&pool)
    .await
    .unwrap();
    let report = bias::report(&pool, run).await.unwrap();
    let bands: Vec<(&str, i64, i64)> =
        report.reasoning_bands.iter().map(|b| (b.label.as_str(), b.counts.ok, b.counts.timed_out)).collect();
    assert_eq!(bands[1], ("1–255 tokens", 20, 0));
    assert_eq!(bands[3], ("1,024–4,095 tokens", 0, 20));
    assert!(
        report.warnings.iter().any(|w| w.starts_with("Reasoning of 1,024–4,095 tokens fail 100%")),
        "{:?}",
        report.warnings
    );
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_down_endpoint_and_a_stall_raise_alerts(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 5).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    sqlx::query("UPDATE run_endpoints SET healthy = false WHERE run_id = $1")
        .bind(run)
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("UPDATE runs SET created_at = now() - interval '10 minutes' WHERE id = $1")
        .bind(run)
        .execute(&pool)
        .await
        .unwrap();
    let snap = snapshot::full(&pool, run, &AlertPolicy::default()).await.unwrap();
    let kinds: Vec<_> = snap.alerts.iter().map(|a| a.kind).collect();
    assert_eq!(kinds, vec![AlertKind::NoProgress, AlertKind::EndpointDown], "{:?}", snap.alerts);

    // The same alerts reach the app's /metrics through the monitor.
    let metrics = Arc::new(engine::metrics::EngineMetrics::default());
    let stop = tokio_util::sync::CancellationToken::new();
    let monitor =
        tokio::spawn(alerts::monitor(pool.clone(), AlertPolicy::default(), metrics.clone(), stop.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.cancel();
    monitor.await.unwrap();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let mut text = String::new();
    prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
    assert!(text.contains(&format!("run_alert{{run=\"{run}\",kind=\"endpoint_down\"}} 1")), "{text}");
    assert!(text.contains(&format!("run_alert{{run=\"{run}\",kind=\"error_spike\"}} 0")), "{text}");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn viewers_of_a_run_share_one_publisher_that_stops_when_they_leave(pool: sqlx::PgPool) {
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 5).await;
    let run = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    let hub = Arc::new(LiveHub::new(pool.clone(), AlertPolicy::default()));
    let mut feeds: Vec<_> = (0..20).map(|_| hub.subscribe(run)).collect();
    assert_eq!(hub.publishing(), 1);
    for feed in &mut feeds {
        tokio::time::timeout(Duration::from_secs(5), feed.wait_for(|s| s.is_some())).await.unwrap().unwrap();
    }
    let json = feeds[0].borrow().clone().unwrap();
    let snap: domain::dashboard::RunSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(snap.id, run);
    assert_eq!(snap.counts.total(), 5);
    assert_eq!(hub.publishing(), 1, "twenty viewers, one publisher");

    drop(feeds);
    tokio::time::timeout(Duration::from_secs(5), async {
        while hub.publishing() > 0 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the publisher stops once nobody watches");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn the_overview_shows_runs_in_progress_with_their_rate_and_review_progress_per_run(pool: sqlx::PgPool) {
    use engine::dashboard::overview;
    let sim = sim(fast_sim()).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 12).await;
    // No worker: the run stays running with its 12 samples pending.
    let running = create_run(&pool, dataset, settings(vec![endpoint]), by).await;
    // Two per-second records of the last minute, 30 s apart: 6 requests and 600 tokens in 30 s.
    for ago in [30, 1] {
        sqlx::query(
            "INSERT INTO run_metrics (run_id, endpoint_id, at, in_flight, concurrency_limit, completed, errors, client_tokens)
             VALUES ($1, $2, now() - make_interval(secs => $3), 4, 8, 3, 0, 300)",
        )
        .bind(running)
        .bind(endpoint)
        .bind(f64::from(ago))
        .execute(&pool)
        .await
        .unwrap();
    }
    let finished = finished_run(&pool, &vec![SeedSample::answered("q", "r", "a"); 5]).await;
    for (review_state, n) in [("approved", 2), ("rejected", 1), ("flagged", 1)] {
        sqlx::query(
            "UPDATE samples SET review_state = $2::review_state, reviewed_at = now() WHERE id IN (
                 SELECT id FROM samples WHERE run_id = $1 AND review_state = 'unreviewed' ORDER BY id LIMIT $3)",
        )
        .bind(finished)
        .bind(review_state)
        .bind(n)
        .execute(&pool)
        .await
        .unwrap();
    }

    let in_progress = overview::runs_in_progress(&pool).await.unwrap();
    assert_eq!(in_progress.len(), 1, "the completed run is not in progress: {in_progress:?}");
    let run = &in_progress[0];
    assert_eq!((run.id, run.status, run.counts.pending), (running, RunStatus::Running, 12));
    assert!((run.tokens_per_s - 20.0).abs() < 1.0, "600 tokens over 30 s: {}", run.tokens_per_s);
    let eta = run.eta_secs.expect("a running run with a rate has an ETA");
    assert!((eta - 60.0).abs() < 3.0, "12 samples at 0.2/s: {eta}");

    let review = overview::review_progress(&pool, 8).await.unwrap();
    assert_eq!(review.len(), 1, "a run with nothing finished has nothing to review: {review:?}");
    let progress = &review[0];
    assert_eq!(progress.run_id, finished);
    assert_eq!((progress.to_review, progress.approved, progress.rejected, progress.flagged), (1, 2, 1, 1));
    assert_eq!(progress.total(), 5);
    assert_eq!(overview::datasets_ready(&pool).await.unwrap(), 2);

    sqlx::query("UPDATE runs SET status = 'paused' WHERE id = $1")
        .bind(running)
        .execute(&pool)
        .await
        .unwrap();
    let paused = overview::runs_in_progress(&pool).await.unwrap();
    assert_eq!(paused[0].eta_secs, None, "a paused run has no ETA");
}
