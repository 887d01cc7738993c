use crate::{auth::LoginLimiter, datasets::DatasetSettings, metrics::EngineMetrics, vllm::http_client};
use sqlx::PgPool;
use std::sync::Arc;

/// What request handlers and server functions need from the engine, cheap to clone.
#[derive(Clone)]
pub struct Services {
    pub pool: PgPool,
    pub login_limiter: Arc<LoginLimiter>,
    /// One HTTP connection pool for every vLLM server.
    pub http: reqwest::Client,
    pub metrics: Arc<EngineMetrics>,
    /// Where datasets may be read from and stored.
    pub datasets: Arc<DatasetSettings>,
}

impl Services {
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            login_limiter: Arc::new(LoginLimiter::default()),
            http: http_client(),
            metrics: Arc::new(EngineMetrics::default()),
            datasets: Arc::new(DatasetSettings::default()),
        }
    }

    pub fn with_datasets(mut self, settings: DatasetSettings) -> Self {
        self.datasets = Arc::new(settings);
        self
    }
}
