//! The Endpoints page: register vLLM servers, test the connection, see their models, and
//! watch each server's concurrency limit (shared by the runs on it), its load and its runs.

use crate::{
    components::{interval::every, time::RelativeTime},
    users::confirm,
    AppError,
};
use domain::{units::thousands, EndpointCapacity, EndpointSummary};
use leptos::prelude::*;
use leptos_meta::Title;

#[server(endpoint = "endpoints/list")]
pub async fn list_endpoints() -> Result<Vec<EndpointSummary>, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    Ok(engine::endpoints::list(&ssr::services()?.pool).await?)
}

#[server(endpoint = "endpoints/create")]
pub async fn create_endpoint(
    name: String,
    base_url: String,
    api_key: String,
) -> Result<EndpointSummary, AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    let endpoint = engine::endpoints::create(
        &services.pool,
        &services.http,
        engine::endpoints::NewEndpoint { name: &name, base_url: &base_url, api_key: Some(api_key.as_str()) },
        viewer.id,
    )
    .await?;
    tracing::info!(by = %viewer.username, endpoint = %endpoint.name, url = %endpoint.base_url, "endpoint added");
    Ok(endpoint)
}

#[server(endpoint = "endpoints/check")]
pub async fn check_endpoint(id: i64) -> Result<EndpointSummary, AppError> {
    use crate::ssr;
    ssr::require(domain::Role::Engineer)?;
    let services = ssr::services()?;
    Ok(engine::endpoints::check(&services.pool, &services.http, id).await?)
}

#[server(endpoint = "endpoints/delete")]
pub async fn delete_endpoint(id: i64) -> Result<(), AppError> {
    use crate::ssr;
    let viewer = ssr::require(domain::Role::Engineer)?;
    engine::endpoints::delete(&ssr::services()?.pool, id).await?;
    tracing::info!(by = %viewer.username, endpoint.id = id, "endpoint removed");
    Ok(())
}

#[component]
pub fn EndpointsPage() -> impl IntoView {
    let create = ServerAction::<CreateEndpoint>::new();
    let check = ServerAction::<CheckEndpoint>::new();
    let delete = ServerAction::<DeleteEndpoint>::new();
    // The load and limits change by the second while runs use the servers.
    let refresh = RwSignal::new(0u64);
    every(std::time::Duration::from_secs(5), move || refresh.update(|n| *n += 1));
    let endpoints = Resource::new(
        move || (create.version().get(), check.version().get(), delete.version().get(), refresh.get()),
        |_| list_endpoints(),
    );
    let last_error = move || {
        [
            create.value().get().and_then(|r| r.err()),
            check.value().get().and_then(|r| r.err()),
            delete.value().get().and_then(|r| r.err()),
        ]
        .into_iter()
        .flatten()
        .next()
        .map(|e| e.to_string())
    };
    view! {
        <Title text="Endpoints"/>
        <h1>"Endpoints"</h1>
        <p class="muted">"vLLM servers (OpenAI-compatible) that runs send their prompts to. The API key is kept on the server and never shown again."</p>
        <section class="panel">
            <h2>"Add an endpoint"</h2>
            <ActionForm action=create attr:class="inline-form" attr:data-testid="add-endpoint">
                <label>"Name" <input name="name" required maxlength="100" placeholder="gpu-7"/></label>
                <label>"Base URL" <input name="base_url" required type="url" placeholder="http://gpu-7:8000"/></label>
                <label>"API key" <input name="api_key" type="password" autocomplete="off" placeholder="optional"/></label>
                <button class="primary" type="submit">"Add and test"</button>
            </ActionForm>
            <Show when=move || last_error().is_some()>
                <p class="error" role="alert">{last_error}</p>
            </Show>
        </section>
        <Transition fallback=|| view! { <p class="muted">"Loading endpoints…"</p> }>
            {move || Suspend::new(async move {
                match endpoints.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(list) if list.is_empty() => view! {
                        <p class="empty">"No endpoints yet. Add the base URL of a vLLM server above (the demo simulator runs on http://127.0.0.1:8100)."</p>
                    }.into_any(),
                    Ok(list) => view! {
                        <table class="data" data-testid="endpoints-table">
                            <thead><tr>
                                <th>"Name"</th><th>"URL"</th><th>"Models (max_model_len)"</th><th>"Last check"</th>
                                <th>"Serving"</th><th class="num">"Limit"</th><th>"Load"</th><th>"Draft"</th><th>"Runs (share)"</th><th></th>
                            </tr></thead>
                            <tbody>
                                {list.into_iter().map(|e| view! { <EndpointRow endpoint=e check delete/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn EndpointRow(
    endpoint: EndpointSummary,
    check: ServerAction<CheckEndpoint>,
    delete: ServerAction<DeleteEndpoint>,
) -> impl IntoView {
    let id = endpoint.id;
    let name = endpoint.name.clone();
    let models = if endpoint.models.is_empty() {
        "—".to_string()
    } else {
        endpoint
            .models
            .iter()
            .map(|m| match m.max_model_len {
                Some(len) => format!("{} ({len})", m.id),
                None => m.id.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let capacity = endpoint.capacity.clone();
    let limit = capacity.as_ref().map(|c| {
        let title =
            format!("{} (since {})", c.limit_reason, crate::components::time::exact_utc(c.limit_changed_at));
        view! { <span title=title>{thousands(i64::from(c.limit))}</span> }
    });
    let runs = if endpoint.runs.is_empty() {
        view! { <span class="muted">"none"</span> }.into_any()
    } else {
        endpoint
            .runs
            .iter()
            .map(|r| {
                let href = format!("/runs/{}", r.run_id);
                let title = format!("weight {}{}", r.weight, if r.paused { ", paused" } else { "" });
                view! { <a href=href title=title>{r.name.clone()}</a> " " <span class="small num">{format!("({})", r.share)}</span> " " }
            })
            .collect_view()
            .into_any()
    };
    view! {
        <tr data-endpoint=endpoint.name.clone()>
            <td>{endpoint.name.clone()} {endpoint.has_api_key.then(|| view! { <span class="badge">"key"</span> })}</td>
            <td><code>{endpoint.base_url.clone()}</code></td>
            <td>{models}</td>
            <td><CheckStatus endpoint=endpoint.clone()/></td>
            <td data-testid="endpoint-serving"><Serving capacity=capacity.clone()/></td>
            <td class="num" data-testid="endpoint-limit">{limit}</td>
            <td><Load capacity=capacity.clone()/></td>
            <td data-testid="endpoint-draft"><Draft runs_draft=endpoint.runs_draft acceptance=endpoint.draft_acceptance/></td>
            <td data-testid="endpoint-runs">{runs}</td>
            <td class="actions">
                <button class="link" on:click=move |_| { check.dispatch(CheckEndpoint { id }); }>"Test"</button>
                <button class="link danger" on:click=move |_| {
                    if confirm(&format!("Remove the endpoint {name}?")) {
                        delete.dispatch(DeleteEndpoint { id });
                    }
                }>"Remove"</button>
            </td>
        </tr>
    }
}

/// The last connection test: answers (when) or unreachable (why).
#[component]
pub fn CheckStatus(endpoint: EndpointSummary) -> impl IntoView {
    match (endpoint.check_error, endpoint.checked_at) {
        (Some(error), _) => view! { <span class="badge bad" title=error.clone()>"unreachable"</span> " " <span class="small">{error}</span> }.into_any(),
        (None, Some(at)) => view! { <span class="badge ok">"answers"</span> " " <RelativeTime at/> }.into_any(),
        (None, None) => view! { <span class="muted">"never"</span> }.into_any(),
    }
}

/// Up or down as the workers last saw it; a dash until a run has used the server.
#[component]
pub fn Serving(capacity: Option<EndpointCapacity>) -> impl IntoView {
    match capacity {
        None => view! { <span class="muted" title="No run has used it yet">"—"</span> }.into_any(),
        Some(c) if c.healthy => view! { <span class="badge ok">"up"</span> }.into_any(),
        Some(c) => {
            let why = c.health_reason.unwrap_or_default();
            view! { <span class="badge bad" title=why.clone()>"down"</span> " " <span class="small">{why}</span> }.into_any()
        }
    }
}

/// Whether the server runs a speculative-decoding draft, and its acceptance length over about
/// the last minute while runs use it.
#[component]
pub fn Draft(
    runs_draft: Option<bool>,
    acceptance: Option<domain::endpoint::WindowAcceptance>,
) -> impl IntoView {
    match (runs_draft, acceptance) {
        (_, Some(w)) => {
            let title = format!(
                "1 + accepted ÷ verify steps of the server's spec_decode counters over the last {:.0} s",
                w.seconds
            );
            view! { <span class="badge ok">"draft"</span> " " <span class="small num" title=title>{format!("acceptance {:.2}", w.length)}</span> }.into_any()
        }
        (Some(true), None) => view! {
            <span class="badge ok">"draft"</span> " "
            <span class="small muted" title="No verify steps read in the last minute (acceptance is read while runs use the server)">"no recent steps"</span>
        }.into_any(),
        (Some(false), None) => view! { <span class="muted" title="Its /metrics has no spec_decode counters">"none"</span> }.into_any(),
        (None, None) => view! { <span class="muted" title="Its /metrics could not be read at the last test">"—"</span> }.into_any(),
    }
}

/// The server's own load figures (running, waiting, KV cache, generation rate) and their age.
#[component]
pub fn Load(capacity: Option<EndpointCapacity>) -> impl IntoView {
    capacity.and_then(|c| {
        let observed = c.observed_at?;
        let parts = [
            c.running.map(|r| format!("{} running", thousands(i64::from(r)))),
            c.waiting.map(|w| format!("{} waiting", thousands(i64::from(w)))),
            c.kv_usage.map(|kv| format!("KV {:.0}%", kv * 100.0)),
            c.generation_tps.map(|tps| format!("{} tok/s", thousands(tps.round() as i64))),
        ];
        let text = parts.into_iter().flatten().collect::<Vec<_>>().join(" · ");
        Some(view! { <span class="small">{text}</span> " " <RelativeTime at=observed/> })
    })
}
