//! The HTTP surface: pages and server functions (Leptos), static assets, health and metrics.

use crate::{access, api, downloads, events, health, metrics, session, state::AppState, uploads};
use app::{shell, App};
use axum::{http::StatusCode, middleware, routing::get, Router};
use leptos::prelude::provide_context;
use leptos_axum::{generate_route_list, LeptosRoutes};
use std::time::Duration;
use tower_http::{
    compression::CompressionLayer,
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    services::ServeDir,
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

/// Pages and server functions must answer within this time; streams are routed elsewhere.
const PAGE_TIMEOUT: Duration = Duration::from_secs(60);

pub fn build(state: AppState, sessions: session::Layer) -> Router {
    let options = state.leptos_options.clone();
    let services = state.services.clone();
    let http_metrics = state.http_metrics.clone();

    let app_routes = Router::new()
        .leptos_routes_with_context(
            &state,
            generate_route_list(App),
            move || provide_context(services.clone()),
            {
                let options = options.clone();
                move || shell(options.clone())
            },
        )
        .fallback(leptos_axum::file_and_error_handler::<AppState, _>(shell))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, PAGE_TIMEOUT))
        // Streams stay open as long as their page; they are guarded like server functions.
        .route("/api/runs/{id}/events", get(events::run_events))
        .layer(middleware::from_fn(access::guard_pages))
        .layer(middleware::from_fn(access::api_error_status))
        .layer(middleware::from_fn(access::guard_api))
        .layer(middleware::from_fn_with_state(state.clone(), access::resolve_viewer))
        .layer(sessions.clone());

    // Uploads and export downloads stream for as long as they take: same guards, no page timeout.
    let stream_routes = uploads::routes()
        .merge(downloads::routes())
        .layer(middleware::from_fn(access::guard_api))
        .layer(middleware::from_fn_with_state(state.clone(), access::resolve_viewer))
        .layer(sessions);

    let pkg_dir = std::path::Path::new(options.site_root.as_ref()).join(options.site_pkg_dir.as_ref());
    Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(metrics::serve))
        .nest_service("/pkg", ServeDir::new(pkg_dir).precompressed_gzip())
        .merge(stream_routes)
        // Bearer tokens only, no session: see `api::auth`.
        .merge(api::routes(state.clone()))
        .merge(app_routes)
        .with_state(state)
        .layer(middleware::from_fn_with_state(http_metrics, metrics::track))
        .layer(CompressionLayer::new())
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|request: &axum::http::Request<_>| {
            let request_id =
                request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!(
                "request",
                method = %request.method(),
                path = %request.uri().path(),
                request_id = %request_id,
            )
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
}
