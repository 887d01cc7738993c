use crate::{
    auth::LoginLimiter,
    dashboard::{AlertPolicy, LiveHub},
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
        }
    }
}
