use crate::metrics::HttpMetrics;
use axum::extract::FromRef;
use engine::Services;
use leptos::config::LeptosOptions;
use prometheus_client::registry::Registry;
use std::sync::Arc;

/// Everything the router's handlers share.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub services: Services,
    /// Every metric the app exports; each process has its own, so tests never share one.
    pub metrics: Arc<Registry>,
    pub http_metrics: HttpMetrics,
}

impl AppState {
    pub fn new(leptos_options: LeptosOptions, services: Services) -> Self {
        let mut registry = Registry::with_prefix("draft_studio");
        let http_metrics = HttpMetrics::register(&mut registry);
        services.metrics.register(&mut registry);
        Self { leptos_options, services, metrics: Arc::new(registry), http_metrics }
    }
}
