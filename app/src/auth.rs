//! Signing in and out, and who is signed in.

use crate::AppError;
use domain::Viewer;
use leptos::prelude::*;

#[server(endpoint = "auth/viewer")]
pub async fn current_viewer() -> Result<Option<Viewer>, AppError> {
    Ok(crate::ssr::viewer())
}

#[server(endpoint = "auth/login")]
pub async fn login(username: String, password: String) -> Result<Viewer, AppError> {
    use crate::ssr;
    let services = ssr::services()?;
    let viewer = services
        .login_limiter
        .login(
            &services.pool,
            engine::auth::LoginRequest {
                username: &username,
                password: &password,
                address: ssr::client_ip(),
            },
        )
        .await?;
    let session = ssr::session()?;
    // A new session id on sign-in, so an id planted before sign-in is worthless afterwards.
    session.cycle_id().await.map_err(ssr::session_error)?;
    session.insert(engine::auth::SESSION_USER_ID, viewer.id).await.map_err(ssr::session_error)?;
    tracing::info!(user.id = viewer.id, user.name = %viewer.username, "signed in");
    Ok(viewer)
}

#[server(endpoint = "auth/logout")]
pub async fn logout() -> Result<(), AppError> {
    use crate::ssr;
    ssr::session()?.flush().await.map_err(ssr::session_error)?;
    Ok(())
}

/// Only same-site paths are followed after sign-in, never another origin.
pub fn safe_next(next: Option<String>) -> String {
    next.filter(|n| n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/\\"))
        .unwrap_or_else(|| "/".to_string())
}

/// Loads a page fresh, dropping every client-side cache of the previous user's data.
pub fn hard_navigate(path: &str) {
    #[cfg(feature = "hydrate")]
    {
        let _ = window().location().assign(path);
    }
    #[cfg(not(feature = "hydrate"))]
    let _ = path;
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/runs/3?x=1".into())), "/runs/3?x=1");
        assert_eq!(safe_next(Some("https://evil.example".into())), "/");
        assert_eq!(safe_next(Some("//evil.example".into())), "/");
        assert_eq!(safe_next(None), "/");
    }
}
