//! Generation tests whose verdict depends on timing: how evenly two servers share a run, how
//! full a fixed limit keeps the server. Each test's simulator, engine and sampling loop share
//! the one thread of its runtime; beside the other generation tests on a 2-core machine, a
//! stall of that thread reads as a slow refill (CI once saw 63.33 requests held on average
//! against a floor of 63.4). So they live in their own test binary (cargo runs test binaries
//! one at a time) and take turns through `ALONE`: each runs with the machine to itself.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::generation::Concurrency;
use engine::testing::*;
use std::time::Duration;

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Held for a whole test: the tests here run one after another.
static ALONE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Both servers answer at the same pace, so each takes a fair share of the run.
#[sqlx::test(migrator = "MIGRATOR")]
async fn two_endpoints_share_the_work(pool: sqlx::PgPool) {
    let _alone = ALONE.lock().await;
    let a = sim(fast_sim()).await;
    let b = sim(fast_sim()).await;
    let by = user(&pool).await;
    let ea = endpoint(&pool, &a, by).await;
    let eb = endpoint(&pool, &b, by).await;
    let dataset = dataset(&pool, 60).await;
    let run = create_run(&pool, dataset, settings(vec![ea, eb]), by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_exactly_one_result_each(&pool, run).await;
    let on_a = a.stats().requests_finished.stop;
    let on_b = b.stats().requests_finished.stop;
    assert_eq!(on_a + on_b, 60);
    assert!(on_a >= 10 && on_b >= 10, "balanced: {on_a} vs {on_b}");
}

/// While samples wait in the queue, a run at a fixed limit keeps that many requests on the
/// server: a freed slot is filled from the samples claimed ahead, not after a query and not
/// after the finished try's result is written.
#[sqlx::test(migrator = "MIGRATOR")]
async fn a_fixed_limit_keeps_the_server_full_while_samples_wait(pool: sqlx::PgPool) {
    let _alone = ALONE.lock().await;
    const LIMIT: u64 = 64;
    const SAMPLES: u64 = 448;
    let mut config = fast_sim();
    config.time_scale = 1.0;
    config.engine.per_seq_tokens_per_s = 100.0;
    config.lengths.median_completion_tokens = 60;
    config.lengths.completion_sigma = 0.4; // answers of about 0.3–1.3 s, so slots free one by one
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, SAMPLES as usize).await;
    let mut s = settings(vec![endpoint]);
    s.concurrency = Concurrency::Fixed { limit: LIMIT as u32 };
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    // Sample the server's load from the first full batch until the last sample is sent.
    let mut readings = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let stats = sim.stats();
        if stats.requests_started >= SAMPLES || tokio::time::Instant::now() > deadline {
            break;
        }
        if stats.requests_started >= LIMIT {
            readings.push(stats.running + stats.waiting);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_exactly_one_result_each(&pool, run).await;
    assert!(readings.len() > 200, "the run was sampled through its middle: {} readings", readings.len());
    let mean = readings.iter().sum::<u64>() as f64 / readings.len() as f64;
    let most = readings.iter().copied().max().unwrap();
    assert!(most <= LIMIT, "never more than the limit on the server: {most}");
    assert!(mean >= LIMIT as f64 - 0.6, "the server held {mean:.2} requests on average, not {LIMIT}");
    let unsent = abandoned_tries(&pool, run).await;
    assert_eq!(unsent, 0, "samples claimed ahead were all sent, none recorded as abandoned");
}
