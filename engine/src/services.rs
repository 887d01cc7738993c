use crate::{
    auth::LoginLimiter,
    dashboard::{AlertPolicy, LiveHub},
    datasets::DatasetSettings,
    metrics::EngineMetrics,
    vllm::http_client,
};
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
    /// Live run snapshots shared by every open dashboard.
    pub live: Arc<LiveHub>,
    /// Where exports may be written (storage roots, S3 settings).
    pub export_storage: Arc<crate::export::Storage>,
    /// Where datasets may be read from and stored.
    pub datasets: Arc<DatasetSettings>,
}

impl Services {
    pub fn new(pool: PgPool) -> Self {
        Self::with_alert_policy(pool, AlertPolicy::default())
    }

    pub fn with_alert_policy(pool: PgPool, policy: AlertPolicy) -> Self {
        Self {
            live: Arc::new(LiveHub::new(pool.clone(), policy)),
            pool,
            login_limiter: Arc::new(LoginLimiter::default()),
            http: http_client(),
            metrics: Arc::new(EngineMetrics::default()),
            export_storage: Arc::new(crate::export::Storage::new(
                Vec::new(),
                crate::export::S3Options::from_env(),
            )),
            datasets: Arc::new(DatasetSettings::default()),
        }
    }

    pub fn with_datasets(mut self, settings: DatasetSettings) -> Self {
        self.datasets = Arc::new(settings);
        self
    }

    /// Sets the folders exports may be written under (DS_EXPORT_ROOTS).
    pub fn with_export_roots(mut self, roots: Vec<std::path::PathBuf>) -> Self {
        self.export_storage =
            Arc::new(crate::export::Storage::new(roots, crate::export::S3Options::from_env()));
        self
    }
}
