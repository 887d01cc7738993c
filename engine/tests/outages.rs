//! Outages of every shape pause a run and fail no sample: an engine restarting behind a proxy
//! (502, 503, 504 on every route, `/health` included), a killed server (connections refused and
//! cut), an engine failing every request while its `/health` still answers, every stream cut
//! mid-way, and PostgreSQL itself restarting. Tries cut by an outage are recorded, uncounted.
//! A sample still fails for a reason of its own. And a database slow to take results holds up
//! new requests only once a batch of results is waiting.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

use domain::generation::Concurrency;
use engine::testing::*;
use engine::vllm::http_client;
use sqlx::PgPool;
use std::{path::PathBuf, process::Command, time::Duration};
use vllm_sim::{FaultSettings, RunningSim, SimConfig};

const MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

/// Logs to the test's output with `RUST_LOG` set (e.g. `RUST_LOG=engine=debug`).
fn logs() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
}

/// About 0.25 s per request at 10× time, so an outage finds tries in flight.
fn slow_sim() -> SimConfig {
    let mut config = fast_sim();
    config.time_scale = 10.0;
    config.engine.per_seq_tokens_per_s = 20.0;
    config
}

/// A run of `n` samples on `sim` at a fixed concurrency of 8.
async fn start_run(pool: &PgPool, sim: &RunningSim, n: usize) -> i64 {
    start_run_at(pool, sim, n, 8).await
}

async fn start_run_at(pool: &PgPool, sim: &RunningSim, n: usize, limit: u32) -> i64 {
    logs();
    let by = match sqlx::query_scalar("SELECT id FROM users WHERE username = 'eng'")
        .fetch_optional(pool)
        .await
        .unwrap()
    {
        Some(id) => id,
        None => user(pool).await,
    };
    let endpoint = endpoint(pool, sim, by).await;
    let dataset = dataset(pool, n).await;
    let mut s = settings(vec![endpoint]);
    s.max_attempts = 2;
    s.concurrency = Concurrency::Fixed { limit };
    create_run(pool, dataset, s, by).await
}

/// Every sample ok, and not one try counted against a sample for the outage.
async fn assert_outage_cost_nothing(pool: &PgPool, run: i64) {
    assert_exactly_one_result_each(pool, run).await;
    let ok = count(pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await;
    let total = count(pool, "SELECT count(*) FROM samples WHERE run_id = $1", run).await;
    assert_eq!(ok, total, "{:?}", state_counts(pool, run).await);
    let counted_failures = count(
        pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.counted AND a.error IS NOT NULL",
        run,
    )
    .await;
    let counted: Vec<(Option<String>, Option<String>)> = sqlx::query_as(
        "SELECT a.error_kind, a.error FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND a.counted AND a.error IS NOT NULL",
    )
    .bind(run)
    .fetch_all(pool)
    .await
    .unwrap();
    assert_eq!(counted_failures, 0, "no try cut by the outage counts against its sample: {counted:?}");
    let attempts = count(pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND attempts <> 1", run).await;
    assert_eq!(attempts, 0, "every sample's one counted try is its success");
}

async fn uncounted_tries(pool: &PgPool, run: i64) -> i64 {
    count(
        pool,
        "SELECT count(*) FROM sample_attempts a JOIN samples s ON s.id = a.sample_id
         WHERE s.run_id = $1 AND NOT a.counted AND a.error IS NOT NULL",
        run,
    )
    .await
}

async fn endpoint_down(pool: &PgPool, run: i64) -> bool {
    sqlx::query_scalar("SELECT NOT healthy FROM run_endpoints WHERE run_id = $1")
        .bind(run)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_sixty_second_503_outage_behind_a_proxy_fails_nothing(pool: PgPool) {
    let sim = sim(slow_sim()).await;
    let run = start_run(&pool, &sim, 60).await;
    let (stop, worker) = start_worker(&pool);
    tokio::time::sleep(Duration::from_millis(400)).await;
    sim.unavailable_for(Duration::from_secs(60), 503).unwrap(); // 6 s at 10× time
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(endpoint_down(&pool, run).await, "the endpoint is marked down during the outage");
    let during = sim.stats();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(
        sim.stats().unavailable_chat_answers - during.unavailable_chat_answers <= 1,
        "dispatch is paused: only health checks reach the proxy ({:?})",
        sim.stats()
    );
    wait_for_status(&pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_outage_cost_nothing(&pool, run).await;
    assert!(uncounted_tries(&pool, run).await > 0, "the tries the restart cut are recorded");
    assert!(sim.stats().unavailable_answers > 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn gateway_errors_and_timeouts_pause_too(pool: PgPool) {
    for status in [502, 504] {
        let sim = sim(slow_sim()).await;
        let run = start_run(&pool, &sim, 30).await;
        let (stop, worker) = start_worker(&pool);
        tokio::time::sleep(Duration::from_millis(300)).await;
        sim.unavailable_for(Duration::from_secs(20), status).unwrap();
        wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
        stop.cancel();
        worker.await.unwrap().unwrap();
        assert_outage_cost_nothing(&pool, run).await;
        assert!(sim.stats().unavailable_answers > 0, "{status}");
    }
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_killed_server_fails_nothing_and_counts_nothing(pool: PgPool) {
    let sim = sim(slow_sim()).await;
    let run = start_run(&pool, &sim, 60).await;
    let (stop, worker) = start_worker(&pool);
    tokio::time::sleep(Duration::from_millis(400)).await;
    sim.go_down_for(Duration::from_secs(40)); // 4 s at 10× time
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(endpoint_down(&pool, run).await, "the endpoint is marked down during the outage");
    wait_for_status(&pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_outage_cost_nothing(&pool, run).await;
    assert!(uncounted_tries(&pool, run).await > 0, "the streams the kill cut are recorded");
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn an_engine_failing_every_request_behind_a_healthy_api_fails_nothing(pool: PgPool) {
    let sim = sim(slow_sim()).await;
    let run = start_run(&pool, &sim, 60).await;
    let (stop, worker) = start_worker(&pool);
    tokio::time::sleep(Duration::from_millis(400)).await;
    sim.failing_for(Duration::from_secs(40));
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert!(endpoint_down(&pool, run).await, "the endpoint is marked down though /health answers");
    wait_for_status(&pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_outage_cost_nothing(&pool, run).await;
    assert!(sim.stats().engine_failures > 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn every_stream_cut_mid_way_fails_nothing(pool: PgPool) {
    let sim = sim(slow_sim()).await;
    let run = start_run(&pool, &sim, 40).await;
    let (stop, worker) = start_worker(&pool);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Every connection reset at once, and every new stream cut as well for three seconds.
    sim.set_faults(FaultSettings { drop_connection: 1.0, ..Default::default() }).unwrap();
    sim.cut_connections();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    sim.set_faults(FaultSettings::default()).unwrap();
    wait_for_status(&pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_outage_cost_nothing(&pool, run).await;
    assert!(sim.stats().faults.drop_connection > 0);
}

#[sqlx::test(migrator = "MIGRATOR")]
async fn a_sample_still_fails_for_its_own_errors_while_the_server_serves_others(pool: PgPool) {
    let mut config = slow_sim();
    config.faults =
        FaultSettings { http_500_if_prompt_contains: Some("[poison]".into()), ..Default::default() };
    let sim = sim(config).await;
    let by = user(&pool).await;
    let endpoint = endpoint(&pool, &sim, by).await;
    let questions: Vec<String> = (0..20)
        .map(|i| if i % 5 == 0 { format!("Question {i} [poison]") } else { format!("Question {i}: fine") })
        .collect();
    let dataset = dataset_of(&pool, &questions).await;
    let mut s = settings(vec![endpoint]);
    s.max_attempts = 3;
    let run = create_run(&pool, dataset, s, by).await;
    let (stop, worker) = start_worker(&pool);
    wait_for_status(&pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    let failed = count(
        &pool,
        "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'failed' AND attempts = 3 AND error LIKE 'HTTP 500%'",
        run,
    )
    .await;
    assert_eq!(failed, 4, "{:?}", state_counts(&pool, run).await);
    let ok = count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await;
    assert_eq!(ok, 16);
}

/// A PostgreSQL cluster of the test's own (initdb in a temporary folder, its own port), so
/// it can be stopped and started without touching the server the other tests use.
struct PrivatePostgres {
    bin: PathBuf,
    data: tempfile::TempDir,
    port: u16,
}

impl PrivatePostgres {
    fn start() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| versions.filter_map(Result::ok).map(|v| v.path().join("bin")).max())
            .filter(|bin| bin.join("initdb").is_file())
            .expect("this test runs its own PostgreSQL: install the postgresql package (initdb under /usr/lib/postgresql/*/bin)");
        let data = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let cluster = Self { bin, data, port };
        if is_root() {
            // initdb refuses to run as root; the cluster belongs to the postgres user.
            run(Command::new("chown").arg("-R").arg("postgres").arg(cluster.data.path()));
        }
        run(cluster.as_owner("initdb").args(["-U", "postgres", "--auth=trust", "-D"]).arg(cluster.dir()));
        cluster.pg_ctl("start");
        cluster
    }

    fn dir(&self) -> PathBuf {
        self.data.path().join("cluster")
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn as_owner(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    fn pg_ctl(&self, action: &str) {
        let options =
            format!("-p {} -k {} -c listen_addresses=127.0.0.1", self.port, self.data.path().display());
        // The server's output goes to a file: it would otherwise hold our pipes open.
        let log = self.data.path().join("server.log");
        run(self
            .as_owner("pg_ctl")
            .args(["-D"])
            .arg(self.dir())
            .arg("-l")
            .arg(log)
            .args(["-w", "-m", "fast", "-o", &options, action]));
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ =
            self.as_owner("pg_ctl").args(["-D"]).arg(self.dir()).args(["-m", "immediate", "stop"]).output();
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn run(command: &mut Command) {
    let output = command.output().unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Waits for the run's status, riding out the moments the database is away.
async fn wait_through_outage(pool: &PgPool, run: i64, status: &str, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let current: Option<String> = sqlx::query_scalar("SELECT status::text FROM runs WHERE id = $1")
            .bind(run)
            .fetch_one(pool)
            .await
            .ok();
        if current.as_deref() == Some(status) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "run {run} still {current:?} after {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_postgresql_restart_mid_run_loses_no_generated_output() {
    let postgres = PrivatePostgres::start();
    // A short acquire timeout makes the outage surface as errors within its three seconds
    // (with the default ten, the pool would wait it out and nothing would need holding).
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(16)
        .acquire_timeout(Duration::from_millis(500))
        .connect(&postgres.url())
        .await
        .unwrap();
    engine::db::migrate(&pool).await.unwrap();
    let sim = sim(slow_sim()).await;
    let run = start_run(&pool, &sim, 80).await;
    let metrics = std::sync::Arc::new(engine::metrics::EngineMetrics::default());
    let worker =
        engine::generation::Worker::new(pool.clone(), http_client(), metrics.clone(), test_options());
    let stop = tokio_util::sync::CancellationToken::new();
    let worker = tokio::spawn(worker.run(stop.clone()));
    tokio::time::sleep(Duration::from_millis(600)).await;

    // Down for three seconds, longer than a lease: tries finish meanwhile and must be held.
    let finished_before = sim.stats().requests_finished.stop;
    postgres.pg_ctl("stop");
    let connecting = <sqlx::PgConnection as sqlx::Connection>::connect(&postgres.url()).await;
    assert!(connecting.is_err(), "the database is away");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let finished_while_away = sim.stats().requests_finished.stop - finished_before;
    postgres.pg_ctl("start");

    wait_through_outage(&pool, run, "completed", Duration::from_secs(90)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert!(finished_while_away > 0, "the test must end tries while the database is away");
    assert!(metrics.results_held.get() > 0, "and their results must have been held");
    assert_eq!(metrics.results_given_up.get(), 0);
    assert_outage_cost_nothing(&pool, run).await;
    let generated = sim.stats().requests_finished.stop;
    assert_eq!(generated, 80, "no answer was generated twice: every held result was written");
}

/// Result writes that cannot finish (here `sample_tokens` is locked, so every settle waits, as
/// behind a long lock or a PostgreSQL short of CPU) used to take the shared pool's connections
/// ahead of the claim that refills the batch: with 3 connections, dispatch stopped after one
/// batch. Results now wait on connections of their own, and new requests keep starting until
/// two batches of tries (twice the part's 16) are alive, in flight or writing: then they stop,
/// so memory does not grow with every answer. Once the writes go through, every sample has its
/// one result.
#[sqlx::test(migrator = "MIGRATOR")]
async fn results_waiting_for_the_database_hold_up_new_requests_only_after_a_batch(
    options: sqlx::postgres::PgPoolOptions,
    connect: sqlx::postgres::PgConnectOptions,
) {
    use sqlx::Connection;
    let pool = options.max_connections(3).connect_with(connect.clone()).await.unwrap();
    let sim = sim(fast_sim()).await;
    let run = start_run_at(&pool, &sim, 80, 16).await;
    let mut locker = sqlx::PgConnection::connect_with(&connect).await.unwrap();
    let mut lock = locker.begin().await.unwrap();
    sqlx::query("LOCK TABLE sample_tokens IN SHARE MODE").execute(&mut *lock).await.unwrap();

    let (stop, worker) = start_worker(&pool);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while sim.stats().requests_started < 32 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Time for more to start, were nothing holding them.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let started = sim.stats().requests_started;
    let written = count(&pool, "SELECT count(*) FROM samples WHERE run_id = $1 AND state = 'ok'", run).await;
    assert_eq!(written, 0, "no result could be written while the table was locked");
    assert_eq!(started, 32, "two batches started, no more and no fewer ({:?})", sim.stats());

    lock.rollback().await.unwrap();
    wait_for_status(&pool, run, "completed", Duration::from_secs(60)).await;
    stop.cancel();
    worker.await.unwrap().unwrap();
    assert_outage_cost_nothing(&pool, run).await;
    assert_eq!(sim.stats().requests_started, 80, "no sample was generated twice");
}
