//! What each command-line subcommand does.

use crate::{
    cli::{Cli, Command, DatasetCommand, DatasetImport, EndpointCommand, TokenCommand, UserAdd, UserCommand},
    config::Config,
    leptos_config, router, session, shutdown,
    state::AppState,
    telemetry,
};
use anyhow::Context;
use engine::Services;
use sqlx::PgPool;
use std::{io::IsTerminal, net::SocketAddr, time::Duration};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

/// How long shutdown waits for background tasks after the HTTP server has drained.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(30);
/// The demo conversations shipped in the repository.
const DEMO_DATASET: &str = "demo/conversations.jsonl";

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    let config = Config::from_env()?;
    telemetry::init(config.log_format);
    let shutdown = CancellationToken::new();
    shutdown::cancel_on_signal(shutdown.clone()).context("cannot listen for SIGTERM and Ctrl-C")?;
    match cli.command {
        Command::Serve { no_workers } => serve(config, no_workers, shutdown).await,
        Command::Worker => worker(config, shutdown).await,
        Command::Migrate => {
            open_database(&config).await?;
            println!("database is up to date");
            Ok(())
        }
        Command::User(command) => user(config, command).await,
        Command::Endpoint(command) => endpoint(config, command).await,
        Command::Dataset(command) => dataset(config, command).await,
        Command::Token(command) => token(config, command).await,
        Command::Run(_) | Command::Export(_) | Command::Acceptance(_) => {
            anyhow::bail!(
                "`run`, `export` and `acceptance` talk to the API; main dispatches them before configuration is read"
            )
        }
    }
}

async fn token(config: Config, command: TokenCommand) -> anyhow::Result<()> {
    let pool = open_database(&config).await?;
    match command {
        TokenCommand::Create { username, name, days } => {
            let username = engine::auth::normalize_username(&username)?;
            let user_id =
                sqlx::query_scalar!("SELECT id FROM users WHERE username = $1 AND NOT disabled", username)
                    .fetch_optional(&pool)
                    .await?
                    .with_context(|| {
                        format!(
                            "there is no enabled account `{username}`; add it with `draft-studio user add`"
                        )
                    })?;
            let created = engine::auth::tokens::create(&pool, user_id, &name, days).await?;
            eprintln!(
                "token {:?} of {username}, expires {}; it is shown only now:",
                created.summary.name,
                created.summary.expires_at.date()
            );
            println!("{}", created.token);
        }
    }
    Ok(())
}

/// Creates the database when missing, connects, and applies pending migrations.
pub async fn open_database(config: &Config) -> anyhow::Result<PgPool> {
    engine::db::ensure_database(&config.database_url).await?;
    let pool = engine::db::connect(&config.database_url, 32).await?;
    engine::db::migrate(&pool).await?;
    Ok(pool)
}

async fn serve(config: Config, no_workers: bool, shutdown: CancellationToken) -> anyhow::Result<()> {
    let pool = open_database(&config).await?;
    let services = Services::with_alert_policy(pool.clone(), config.alert_policy())
        .with_datasets(config.dataset_settings())
        .with_export_roots(config.export_roots.clone());
    let store = session::store(pool.clone());
    let key = session::signing_key(&config)?;
    let state = AppState::new(leptos_config::options(&config), services.clone());
    let app = router::build(state, session::layer(store.clone(), key, config.secure_cookies()));

    let tasks = TaskTracker::new();
    tasks.spawn(delete_expired_sessions(store, shutdown.clone()));
    tasks.spawn(engine::dashboard::alerts::monitor(
        pool.clone(),
        config.alert_policy(),
        services.metrics.clone(),
        shutdown.clone(),
    ));
    // Open event streams end with the hub, so the HTTP server can drain.
    tasks.spawn({
        let (live, shutdown) = (services.live.clone(), shutdown.clone());
        async move {
            shutdown.cancelled().await;
            live.close();
        }
    });
    if config.run_workers && !no_workers {
        tasks.spawn(run_worker(&config, &services, shutdown.clone()));
    }
    // Export jobs run here as they always did (and in any `draft-studio worker`): this also takes
    // over or ends the jobs of processes that died. So are imports whose process died.
    tasks.spawn(run_export_jobs(&services, shutdown.clone()));
    tasks.spawn(run_import_jobs(&config, &services, shutdown.clone()));

    let listener = crate::listener::bind(config.bind).await.with_context(|| {
        format!("cannot listen on {} (DS_BIND): is another server already using it?", config.bind)
    })?;
    print_banner(&config, &pool).await;
    axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>())
        .with_graceful_shutdown(shutdown.clone().cancelled_owned())
        .await
        .context("the HTTP server failed")?;

    shutdown.cancel();
    tasks.close();
    if tokio::time::timeout(SHUTDOWN_GRACE, tasks.wait()).await.is_err() {
        tracing::warn!("background tasks did not stop within {SHUTDOWN_GRACE:?}; exiting anyway");
    }
    tracing::info!("stopped");
    Ok(())
}

/// The generation worker of this process, until `stop`.
fn run_worker(
    config: &Config,
    services: &Services,
    stop: CancellationToken,
) -> impl std::future::Future<Output = ()> {
    let worker = engine::generation::Worker::new(
        services.pool.clone(),
        services.http.clone(),
        services.metrics.clone(),
        config.worker_options(),
    );
    async move {
        if let Err(e) = worker.run(stop).await {
            tracing::error!(error = %e, "the generation worker stopped with an error");
        }
    }
}

/// Export jobs claimed from the database, until `stop` (a job in progress goes back to the queue).
fn run_export_jobs(services: &Services, stop: CancellationToken) -> impl std::future::Future<Output = ()> {
    engine::export::runner::work(
        services.pool.clone(),
        services.export_storage.clone(),
        engine::export::runner::JobOptions::default(),
        stop,
    )
}

/// Imports taken over from processes that died, until `stop` (one in progress is handed back).
fn run_import_jobs(
    config: &Config,
    services: &Services,
    stop: CancellationToken,
) -> impl std::future::Future<Output = ()> {
    engine::datasets::jobs::work(
        services.pool.clone(),
        services.http.clone(),
        config.dataset_settings(),
        stop,
    )
}

/// `draft-studio worker`: generation, export and import jobs, no web UI, until SIGTERM or Ctrl-C.
async fn worker(config: Config, shutdown: CancellationToken) -> anyhow::Result<()> {
    let pool = open_database(&config).await?;
    let services = Services::new(pool).with_export_roots(config.export_roots.clone());
    println!("Draft Studio worker running; stop it with Ctrl-C or SIGTERM");
    tokio::join!(
        run_worker(&config, &services, shutdown.clone()),
        run_export_jobs(&services, shutdown.clone()),
        run_import_jobs(&config, &services, shutdown)
    );
    tracing::info!("stopped");
    Ok(())
}

async fn print_banner(config: &Config, pool: &PgPool) {
    println!("Draft Studio is running at {}", config.display_url());
    if matches!(engine::db::autovacuum_on(pool).await, Ok(false)) {
        tracing::warn!(
            "autovacuum is off on this PostgreSQL server: the samples table keeps every old copy of a \
             sample and pages slow down as runs finish. Set `autovacuum = on` in postgresql.conf, \
             or run VACUUM ANALYZE after each run."
        );
    }
    if matches!(engine::auth::count_users(pool).await, Ok(0)) {
        println!(
            "No accounts yet. Create the first admin with:\n  draft-studio user add <name> --role admin"
        );
    }
}

async fn delete_expired_sessions(store: tower_sessions_sqlx_store::PostgresStore, stop: CancellationToken) {
    use tower_sessions::ExpiredDeletion;
    let mut every = tokio::time::interval(Duration::from_secs(3600));
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {
                if let Err(e) = store.delete_expired().await {
                    tracing::warn!(error = %e, "deleting expired sessions failed");
                }
            }
        }
    }
}

async fn user(config: Config, command: UserCommand) -> anyhow::Result<()> {
    let pool = open_database(&config).await?;
    match command {
        UserCommand::Add(add) => add_user(&pool, add).await,
        UserCommand::SetPassword { username } => {
            let name = engine::auth::normalize_username(&username)?;
            let id: Option<i64> = sqlx::query_scalar("SELECT id FROM users WHERE username = $1")
                .bind(&name)
                .fetch_optional(&pool)
                .await?;
            let id = id.with_context(|| format!("no user named `{name}`"))?;
            let password = read_password()?;
            engine::auth::set_password(&pool, id, &password).await?;
            println!("password changed for {name}");
            Ok(())
        }
        UserCommand::Count => {
            println!("{}", engine::auth::count_users(&pool).await?);
            Ok(())
        }
    }
}

async fn endpoint(config: Config, command: EndpointCommand) -> anyhow::Result<()> {
    let pool = open_database(&config).await?;
    match command {
        EndpointCommand::Add { name, base_url, api_key_env } => {
            let api_key = match &api_key_env {
                Some(var) => {
                    Some(std::env::var(var).with_context(|| format!("{var} is not set (--api-key-env)"))?)
                }
                None => None,
            };
            let by: i64 = sqlx::query_scalar("SELECT id FROM users WHERE role = 'admin' ORDER BY id LIMIT 1")
                .fetch_optional(&pool)
                .await?
                .context("add the first admin first: draft-studio user add <name> --role admin")?;
            let http = engine::vllm::http_client();
            let e = engine::endpoints::create(
                &pool,
                &http,
                engine::endpoints::NewEndpoint {
                    name: &name,
                    base_url: &base_url,
                    api_key: api_key.as_deref(),
                },
                by,
            )
            .await?;
            match e.check_error {
                Some(error) => {
                    println!("added {} ({}), but it does not answer yet: {error}", e.name, e.base_url)
                }
                None => println!("added {} ({}) serving {}", e.name, e.base_url, models_text(&e.models)),
            }
            Ok(())
        }
        EndpointCommand::List => {
            for e in engine::endpoints::list(&pool).await? {
                println!("{}\t{}\t{}", e.name, e.base_url, models_text(&e.models));
            }
            Ok(())
        }
    }
}

fn models_text(models: &[domain::ServedModel]) -> String {
    if models.is_empty() {
        return "no models".into();
    }
    models
        .iter()
        .map(|m| match m.max_model_len {
            Some(len) => format!("{} (max_model_len {len})", m.id),
            None => m.id.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn add_user(pool: &PgPool, add: UserAdd) -> anyhow::Result<()> {
    let password = if add.generate_password { generate_password() } else { read_password()? };
    let user = engine::auth::create_user(
        pool,
        engine::auth::NewUser { username: &add.username, password: &password, role: add.role },
    )
    .await?;
    println!("added {} ({})", user.username, user.role);
    if add.generate_password {
        println!("password: {password}");
    }
    Ok(())
}

fn generate_password() -> String {
    use rand::{distributions::Alphanumeric, Rng};
    rand::thread_rng().sample_iter(&Alphanumeric).take(20).map(char::from).collect()
}

/// Asks twice on a terminal; reads one line when stdin is piped.
fn read_password() -> anyhow::Result<String> {
    if std::io::stdin().is_terminal() {
        let first = rpassword::prompt_password("Password: ")?;
        let second = rpassword::prompt_password("Repeat it: ")?;
        anyhow::ensure!(first == second, "the two passwords differ; nothing was changed");
        Ok(first)
    } else {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }
}

async fn dataset(config: Config, command: DatasetCommand) -> anyhow::Result<()> {
    let pool = open_database(&config).await?;
    let settings = config.dataset_settings();
    match command {
        DatasetCommand::Import(import) => import_dataset(&pool, &settings, import).await,
        DatasetCommand::ImportDemoIfEmpty => {
            let existing = engine::datasets::store::count(&pool).await?;
            if existing > 0 {
                println!("{existing} dataset(s) exist already; the demo is not imported");
                return Ok(());
            }
            let import = DatasetImport {
                path: DEMO_DATASET.into(),
                name: Some("demo conversations".into()),
                schema: None,
                column: None,
                id_column: None,
                category_column: None,
                tools_column: None,
            };
            import_dataset(&pool, &settings, import).await
        }
    }
}

async fn import_dataset(
    pool: &PgPool,
    settings: &engine::datasets::DatasetSettings,
    import: DatasetImport,
) -> anyhow::Result<()> {
    use domain::dataset::{DatasetStatus, Mapping, SourceSpec};
    let name = import.name.clone().unwrap_or_else(|| {
        std::path::Path::new(&import.path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| import.path.clone())
    });
    let mapping = import.schema.map(|schema| {
        let mut mapping = Mapping::new(schema);
        if let Some(column) = import.column.clone() {
            mapping.column = column;
        }
        mapping.id_column = import.id_column.clone();
        mapping.category_column = import.category_column.clone();
        mapping.tools_column = import.tools_column.clone();
        mapping
    });
    anyhow::ensure!(
        mapping.is_some()
            || (import.column.is_none()
                && import.id_column.is_none()
                && import.category_column.is_none()
                && import.tools_column.is_none()),
        "--column, --id-column, --category-column and --tools-column need --schema"
    );
    let started = engine::datasets::import::start(
        pool,
        &engine::vllm::http_client(),
        settings,
        engine::datasets::import::NewImport {
            name,
            source: SourceSpec::Path { path: import.path.clone() },
            mapping,
            created_by: None,
        },
    )
    .await?;
    started.job.await.context("the import task panicked")?;
    let summary = engine::datasets::store::summary(pool, started.id).await?;
    match summary.status {
        DatasetStatus::Ready => {
            println!(
                "imported `{}`: {} rows, {} duplicates, {} rejected ({:.0} rows/s)",
                summary.name,
                summary.rows_imported,
                summary.rows_duplicate,
                summary.rows_rejected,
                summary.rows_per_s
            );
            Ok(())
        }
        status => anyhow::bail!(
            "the import of `{}` {status}: {}",
            summary.name,
            summary.error.unwrap_or_else(|| "no reason recorded".into())
        ),
    }
}
