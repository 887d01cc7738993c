//! Who is asking, and whether they may see the page they ask for.

use crate::state::AppState;
use axum::{
    extract::{Request, State},
    http::{header, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use domain::{page_access, PageAccess};
use tower_sessions::Session;

/// Resolves the session's user once per request and puts their `Viewer` in the request
/// extensions, where page guards and server functions read it. A disabled or deleted user's
/// session is ended here.
pub async fn resolve_viewer(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    if let Some(session) = request.extensions().get::<Session>().cloned() {
        match session.get::<i64>(engine::auth::SESSION_USER_ID).await {
            Ok(Some(user_id)) => match engine::auth::find_viewer(&state.services.pool, user_id).await {
                Ok(Some(viewer)) => {
                    request.extensions_mut().insert(viewer);
                }
                Ok(None) => {
                    if let Err(e) = session.flush().await {
                        tracing::warn!(error = %e, "ending the session of a disabled user failed");
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "loading the signed-in user failed");
                    return (StatusCode::SERVICE_UNAVAILABLE, "the database is not answering; try again shortly")
                        .into_response();
                }
            },
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "reading the session failed; treating the request as anonymous"),
        }
    }
    next.run(request).await
}

/// Enforces `domain::page_access` on page requests: anonymous visitors are redirected to the
/// login page, users without the role get the page rendered as 403 (its content is replaced by
/// the app's Forbidden view, which applies the same rule).
pub async fn guard_pages(request: Request, next: Next) -> Response {
    if !is_page_request(&request) {
        return next.run(request).await;
    }
    let required = match page_access(request.uri().path()) {
        PageAccess::Public => return next.run(request).await,
        PageAccess::Requires(role) => role,
    };
    match request.extensions().get::<domain::Viewer>() {
        None => {
            let target = request.uri().path_and_query().map(|p| p.as_str()).unwrap_or("/");
            let location = if target == "/" {
                "/login".to_string()
            } else {
                format!("/login?next={}", url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>())
            };
            (StatusCode::SEE_OTHER, [(header::LOCATION, location)]).into_response()
        }
        Some(viewer) if viewer.role.allows(required) => next.run(request).await,
        Some(_) => {
            let mut response = next.run(request).await;
            *response.status_mut() = StatusCode::FORBIDDEN;
            response
        }
    }
}

/// A browser asking for a page: GET/HEAD, not a server function, API, asset or file.
fn is_page_request(request: &Request) -> bool {
    let path = request.uri().path();
    let last_segment = path.rsplit('/').next().unwrap_or("");
    matches!(*request.method(), Method::GET | Method::HEAD)
        && !path.starts_with("/api/")
        && !path.starts_with("/pkg/")
        && !last_segment.contains('.')
}
