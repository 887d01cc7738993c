//! Server-side helpers for server functions: the engine, the signed-in user, role checks.

use crate::AppError;
use domain::{Role, Viewer};
use engine::Services;
use http::request::Parts;
use leptos::prelude::*;

/// Sets the HTTP status of the current server-function response to match the error.
pub fn set_status(error: &AppError) {
    if let Some(options) = use_context::<leptos_axum::ResponseOptions>() {
        options.set_status(http::StatusCode::from_u16(error.status()).unwrap_or_default());
    }
}

fn fail(error: AppError) -> AppError {
    set_status(&error);
    error
}

pub fn services() -> Result<Services, AppError> {
    use_context::<Services>().ok_or_else(|| {
        tracing::error!("engine services missing from the server-function context");
        fail(AppError::Internal)
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
        None => Err(fail(AppError::Unauthorized)),
        Some(v) if v.role.allows(role) => Ok(v),
        Some(_) => Err(fail(AppError::Forbidden)),
    }
}

pub fn session() -> Result<tower_sessions::Session, AppError> {
    parts().and_then(|p| p.extensions.get::<tower_sessions::Session>().cloned()).ok_or_else(|| {
        tracing::error!("session layer missing in front of server functions");
        fail(AppError::Internal)
    })
}

pub fn client_ip() -> Option<std::net::IpAddr> {
    parts()?
        .extensions
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map(|info| info.0.ip())
}

/// Maps a session-store failure to an internal error, logging it once.
pub fn session_error(e: tower_sessions::session::Error) -> AppError {
    tracing::error!(error = %e, "session store failed");
    fail(AppError::Internal)
}
