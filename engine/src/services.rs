use crate::auth::LoginLimiter;
use sqlx::PgPool;
use std::sync::Arc;

/// What request handlers and server functions need from the engine, cheap to clone.
#[derive(Clone)]
pub struct Services {
    pub pool: PgPool,
    pub login_limiter: Arc<LoginLimiter>,
}

impl Services {
    pub fn new(pool: PgPool) -> Self {
        Self { pool, login_limiter: Arc::new(LoginLimiter::default()) }
    }
}
