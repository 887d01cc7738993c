//! Server-side helpers for server functions: the engine, the signed-in user, role checks.
//! Errors need no status handling here: the server's `api_error_status` middleware gives each
//! failed call the HTTP status its `AppError` stands for.

use crate::AppError;
use domain::{Role, Viewer};
use engine::Services;
use http::request::Parts;
use leptos::prelude::*;

pub fn services() -> Result<Services, AppError> {
    use_context::<Services>().ok_or_else(|| {
        tracing::error!("engine services missing from the server-function context");
        AppError::Internal
    })
}

fn parts() -> Option<Parts> {
    use_context::<Parts>()
}

/// The signed-in user, resolved once per request by the server's session middleware.
pub fn viewer() -> Option<Viewer> {
    parts().and_then(|p| p.extensions.get::<Viewer>().cloned())
}

/// The signed-in user when their role allows `role`; otherwise 401 or 403.
pub fn require(role: Role) -> Result<Viewer, AppError> {
    match viewer() {
        None => Err(AppError::Unauthorized),
        Some(v) if v.role.allows(role) => Ok(v),
        Some(_) => Err(AppError::Forbidden),
    }
}

pub fn session() -> Result<tower_sessions::Session, AppError> {
    parts().and_then(|p| p.extensions.get::<tower_sessions::Session>().cloned()).ok_or_else(|| {
        tracing::error!("session layer missing in front of server functions");
        AppError::Internal
    })
}

pub fn client_ip() -> Option<std::net::IpAddr> {
    parts()?.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|info| info.0.ip())
}

/// Maps a session-store failure to an internal error, logging it once.
pub fn session_error(e: tower_sessions::session::Error) -> AppError {
    tracing::error!(error = %e, "session store failed");
    AppError::Internal
}
