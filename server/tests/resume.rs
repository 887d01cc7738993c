//! Crash safety: a worker process killed with SIGKILL at random moments, again and again, and
//! restarted each time. The run completes; every sample ends in exactly one terminal state; no
//! finished output is lost or rewritten; no sample has two results.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use engine::testing::*;
use rand::Rng;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use std::{collections::HashMap, process::Stdio, time::Duration};

const KILLS: usize = 20;

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_run_survives_twenty_sigkills(options: PgPoolOptions, connect: PgConnectOptions) {
    let pool = options.connect_with(connect.clone()).await.unwrap();
    let mut config = fast_sim();
    config.time_scale = 10.0;
    config.engine.per_seq_tokens_per_s = 20.0; // about half a second per request
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let dataset = dataset(&pool, 400).await;
    let mut s = settings(vec![endpoint]);
    s.concurrency = domain::generation::Concurrency::Fixed { limit: 12 };
    let run = create_run(&pool, dataset, s, by).await;
    let database_url = database_url(&connect);

    let mut finished: HashMap<i64, (String, Option<String>)> = HashMap::new();
    let mut rng = rand::thread_rng();
    for kill in 0..KILLS {
        let mut child = start_worker_process(&database_url);
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..1500))).await;
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(child.id().unwrap() as i32, libc::SIGKILL) }, 0);
        let status = child.wait().await.unwrap();
        assert!(!status.success(), "kill {kill}: the worker was killed, not stopped");
        check_finished_outputs_unchanged(&pool, run, &mut finished).await;
    }
    let killed_mid_try = count(
        &pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.error_kind = 'lease_expired'",
        run,
    )
    .await;

    let open = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state IN ('pending', 'running')",
        run,
    )
    .await;
    assert!(open > 0, "the kills all fell inside the run");

    let mut last = start_worker_process(&database_url);
    // Registered means its signal handlers are installed too.
    let pid = i64::from(last.id().unwrap());
    while count(&pool, "SELECT count(*) FROM workers WHERE pid = $1", pid).await == 0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    wait_for_status(&pool, run, "completed", Duration::from_secs(180)).await;
    // SAFETY: signalling our own child.
    unsafe { libc::kill(last.id().unwrap() as i32, libc::SIGTERM) };
    let status = tokio::time::timeout(Duration::from_secs(20), last.wait()).await.unwrap().unwrap();
    assert!(status.success(), "the last worker stops cleanly on SIGTERM: {status}");

    check_finished_outputs_unchanged(&pool, run, &mut finished).await;
    assert_exactly_one_result_each(&pool, run).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await,
        400
    );
    assert!(killed_mid_try > 0, "some kills interrupted tries in flight");
    let counted_abandoned = count(
        &pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.result = 'abandoned' AND a.counted",
        run,
    )
    .await;
    assert_eq!(counted_abandoned, 0, "interrupted tries never count against a sample");
    assert!(sim.stats().requests_finished.stop >= 400);
}

fn database_url(connect: &PgConnectOptions) -> String {
    let server = std::env::var("DATABASE_URL").unwrap();
    format!("{}/{}", server.rsplit_once('/').unwrap().0, connect.get_database().unwrap())
}

fn start_worker_process(database_url: &str) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_draft-studio"))
        .arg("worker")
        .env("DATABASE_URL", database_url)
        .env("DS_WORKER_LEASE", "2")
        .env("DS_DATA_DIR", std::env::temp_dir().join("ds-resume"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

/// Records each newly finished sample's state and answer, and checks that none recorded
/// before has changed since.
async fn check_finished_outputs_unchanged(
    pool: &sqlx::PgPool,
    run: i64,
    seen: &mut HashMap<i64, (String, Option<String>)>,
) {
    let rows: Vec<(i64, String, Option<String>)> = sqlx::query_as(
        "SELECT id, state::text, content FROM samples WHERE run_id = $1 AND state NOT IN ('pending', 'running')",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    for (id, state, content) in rows {
        match seen.get(&id) {
            Some(before) => assert_eq!(before, &(state, content), "sample {id} changed after it finished"),
            None => {
                seen.insert(id, (state, content));
            }
        }
    }
}
