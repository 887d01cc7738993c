//! Who is asking, and whether they may see the page they ask for.

use crate::state::AppState;
use axum::{
    extract::{Request, State},
    http::{header, Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use domain::{api_access, page_access, PageAccess};
use tower_sessions::Session;

/// Resolves the session's user once per request and puts their `Viewer` in the request
/// extensions, where page guards and server functions read it. A disabled or deleted user's
/// session is ended here. A run's event stream also takes an API token (`Authorization:
/// Bearer`), so scripts can follow a run; no other session route does, so a token cannot make
/// more tokens or act as a browser.
pub async fn resolve_viewer(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    if is_run_event_stream(request.uri().path()) {
        if let Some(token) = crate::api::auth::bearer(request.headers()).map(str::to_string) {
            match engine::auth::tokens::verify(&state.services.pool, &token).await {
                Ok(Some(viewer)) => {
                    request.extensions_mut().insert(viewer);
                    return next.run(request).await;
                }
                Ok(None) => {
                    return error_json(StatusCode::UNAUTHORIZED, domain::error::AppError::Unauthorized)
                }
                Err(e) => {
                    tracing::error!(error = %e, "verifying an API token failed");
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the database is not answering; try again shortly",
                    )
                        .into_response();
                }
            }
        }
    }
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
                    return (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the database is not answering; try again shortly",
                    )
                        .into_response();
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "reading the session failed; treating the request as anonymous")
            }
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
                format!(
                    "/login?next={}",
                    url::form_urlencoded::byte_serialize(target.as_bytes()).collect::<String>()
                )
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

/// Enforces `domain::api_access` on server-function calls before their arguments are read:
/// 401 for anonymous callers, 403 for a role that is too low or a namespace nobody declared.
pub async fn guard_api(request: Request, next: Next) -> Response {
    let path = request.uri().path();
    if !path.starts_with("/api/") {
        return next.run(request).await;
    }
    let required = match api_access(path) {
        Some(PageAccess::Public) => return next.run(request).await,
        Some(PageAccess::Requires(role)) => role,
        None => {
            tracing::warn!(%path, "server function outside every declared namespace refused");
            return error_json(StatusCode::FORBIDDEN, domain::error::AppError::Forbidden);
        }
    };
    match request.extensions().get::<domain::Viewer>() {
        None => error_json(StatusCode::UNAUTHORIZED, domain::error::AppError::Unauthorized),
        Some(viewer) if viewer.role.allows(required) => next.run(request).await,
        Some(_) => error_json(StatusCode::FORBIDDEN, domain::error::AppError::Forbidden),
    }
}

/// Gives a failed server-function call the status its `AppError` stands for (server_fn itself
/// answers every error with 500), so clients, logs and metrics see 401/403/404/409/422/429.
pub async fn api_error_status(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    if response.status() != StatusCode::INTERNAL_SERVER_ERROR
        || !response.headers().contains_key("serverfnerror")
    {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    // Error bodies are a few hundred bytes of JSON; 64 KiB is a generous cap.
    let bytes = match axum::body::to_bytes(body, 64 * 1024).await {
        Ok(bytes) => bytes,
        Err(_) => return (StatusCode::INTERNAL_SERVER_ERROR, "error body unreadable").into_response(),
    };
    if let Ok(error) = serde_json::from_slice::<domain::error::AppError>(&bytes) {
        parts.status = StatusCode::from_u16(error.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    }
    Response::from_parts(parts, axum::body::Body::from(bytes))
}

/// The same JSON body a server function returns for the error, so the UI shows its message.
fn error_json(status: StatusCode, error: domain::error::AppError) -> Response {
    (status, axum::Json(error)).into_response()
}

/// `/api/runs/{id}/events`.
fn is_run_event_stream(path: &str) -> bool {
    let mut parts = path.strip_prefix("/api/runs/").unwrap_or("").split('/');
    matches!((parts.next(), parts.next(), parts.next()), (Some(id), Some("events"), None) if id.parse::<i64>().is_ok())
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
