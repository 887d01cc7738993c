//! The app's own Prometheus metrics, served at `/metrics`.

use axum::{
    extract::{MatchedPath, Request, State},
    http::{header, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use prometheus_client::{
    encoding::{text::encode, EncodeLabelSet},
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::Registry,
};
use std::{sync::Arc, time::Instant};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HttpLabels {
    pub method: String,
    /// The route template (`/runs/{id}`), never the raw path, so cardinality stays bounded.
    pub route: String,
    pub status: u16,
}

#[derive(Clone)]
pub struct HttpMetrics {
    requests: Family<HttpLabels, Counter>,
    duration: Family<HttpLabels, Histogram>,
}

impl HttpMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let requests = Family::<HttpLabels, Counter>::default();
        let duration = Family::<HttpLabels, Histogram>::new_with_constructor(|| {
            Histogram::new([0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0])
        });
        registry.register("http_requests", "HTTP requests answered", requests.clone());
        registry.register(
            "http_request_duration_seconds",
            "Time to produce the response head",
            duration.clone(),
        );
        Self { requests, duration }
    }
}

/// Counts and times every request by route template and status.
pub async fn track(State(metrics): State<HttpMetrics>, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = request.method().to_string();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| route_group(request.uri().path()).to_string());
    let response = next.run(request).await;
    let labels = HttpLabels { method, route, status: response.status().as_u16() };
    metrics.requests.get_or_create(&labels).inc();
    metrics.duration.get_or_create(&labels).observe(started.elapsed().as_secs_f64());
    response
}

/// Paths with no matched route (static files, 404s) are grouped, never listed one by one.
fn route_group(path: &str) -> &'static str {
    if path.starts_with("/pkg/") {
        "/pkg/*"
    } else {
        "unmatched"
    }
}

pub async fn serve(State(registry): State<Arc<Registry>>) -> Response {
    let mut body = String::new();
    match encode(&mut body, &registry) {
        Ok(()) => {
            ([(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")], body)
                .into_response()
        }
        Err(e) => {
            tracing::error!(error = %e, "encoding metrics failed");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
