//! The OpenAPI 3.1 document, generated from the handlers' `#[utoipa::path]` annotations, and a
//! plain HTML page that lists its routes (no scripts, no CDN: it works offline).

use super::{acceptance, datasets, endpoints, error, exports, runs, samples};
use axum::{response::Html, Json};
use utoipa::{
    openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    Modify, OpenApi,
};

pub const DOCUMENT_PATH: &str = "/api/v1/openapi.json";
pub const PAGE_PATH: &str = "/api/v1/docs";

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Draft Studio API",
        description = "Generate, review and export EAGLE-3 training data. Send a personal token \
                       (Tokens page) as `Authorization: Bearer <token>`; it acts with its owner's role. \
                       Errors are `{\"error\": {\"status\": …, \"message\": …}}`. Lists are paged with \
                       `?after=<next>&limit=<n>`."
    ),
    paths(
        runs::create, runs::list, runs::get, runs::pause, runs::resume, runs::cancel, runs::retry,
        runs::events,
        samples::list, samples::counts, samples::decide_all, samples::get, samples::decide,
        exports::start, exports::list, exports::get, exports::cancel, exports::files, exports::download,
        endpoints::list, endpoints::create, endpoints::check, endpoints::delete,
        datasets::list, datasets::get, datasets::rows, datasets::import, datasets::upload,
        acceptance::run, acceptance::evaluations, acceptance::compare, acceptance::quotas,
        acceptance::register_draft, acceptance::drafts, acceptance::export_drafts, acceptance::lineage_loop,
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail)),
    modifiers(&BearerAuth),
    tags(
        (name = "runs", description = "Generation runs (engineer)"),
        (name = "samples", description = "Review of a run's samples (reviewer)"),
        (name = "exports", description = "Exports of curated samples (engineer)"),
        (name = "endpoints", description = "vLLM servers (engineer)"),
        (name = "datasets", description = "Source datasets (engineer)"),
        (name = "acceptance", description = "A draft's acceptance on the samples, evaluations compared (engineer)"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("ds_…").build(),
            ),
        );
    }
}

pub fn spec() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// `GET /api/v1/openapi.json`.
pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(spec())
}

/// Every (method, path, summary) of the document, in path order.
pub fn operations(doc: &utoipa::openapi::OpenApi) -> Vec<(String, String, String)> {
    let value = serde_json::to_value(doc).unwrap_or_default();
    let mut ops = Vec::new();
    if let Some(paths) = value.get("paths").and_then(|p| p.as_object()) {
        for (path, item) in paths {
            for method in ["get", "post", "put", "patch", "delete"] {
                if let Some(op) = item.get(method) {
                    let summary = op.get("summary").and_then(|s| s.as_str()).unwrap_or("").to_string();
                    ops.push((method.to_uppercase(), path.clone(), summary));
                }
            }
        }
    }
    ops
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// `GET /api/v1/docs`: the routes of the document as a table.
pub async fn page() -> Html<String> {
    let doc = spec();
    let rows: String = operations(&doc)
        .into_iter()
        .map(|(method, path, summary)| {
            format!(
                "<tr><td class=\"method\">{method}</td><td><code>{}</code></td><td>{}</td></tr>\n",
                escape(&path),
                escape(&summary)
            )
        })
        .collect();
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"color-scheme\" content=\"light dark\">\
         <title>Draft Studio API</title><style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}}\
         table{{border-collapse:collapse;width:100%}}td,th{{text-align:left;padding:.3rem .6rem;border-bottom:1px solid #8884}}\
         .method{{font-family:monospace;font-weight:600}}</style></head><body>\
         <h1>Draft Studio API <small>v{version}</small></h1>\
         <p>{description}</p><p>The machine-readable document: <a href=\"{DOCUMENT_PATH}\">{DOCUMENT_PATH}</a> (OpenAPI 3.1). \
         Tokens are made on the <a href=\"/tokens\">Tokens page</a>.</p>\
         <table><thead><tr><th>Method</th><th>Path</th><th>What it does</th></tr></thead><tbody>\n{rows}</tbody></table></body></html>",
        version = escape(&doc.info.version),
        description = escape(doc.info.description.as_deref().unwrap_or("")),
    ))
}
