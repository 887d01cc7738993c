//! The live run page: counters, endpoints, chart, lengths, errors, alerts, bias, and controls.
//! The first render comes from server functions; after hydration, snapshots arrive every second
//! over server-sent events and the page updates in place.

use super::{
    api::{get_run_snapshot, run_bias, run_history, ControlRun, RetryForm, RetryRun, RunAction},
    bias::BiasView,
    chart::{ProgressBar, ThroughputChart},
    compact, duration_text, live,
};
use crate::{
    components::{interval::every, time::RelativeTime},
    users::confirm,
};
use domain::{
    dashboard::{BiasReport, ChartPoint, EndpointLive, RunSnapshot},
    generation::{Concurrency, RunStatus, SampleState, Thinking},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_params_map;
use std::time::Duration;

#[component]
pub fn RunPage() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.with(|p| p.get("id").and_then(|id| id.parse::<i64>().ok()));
    // One server function per resource: during a server render a resource's fetcher sees the
    // request (and so the signed-in user) only until its first await, so a fetcher that awaits
    // two calls would find the second one signed out.
    let not_found = || crate::AppError::NotFound("run not found".into());
    let snapshot =
        Resource::new(id, move |id| async move { get_run_snapshot(id.ok_or_else(not_found)?).await });
    let history = Resource::new(id, move |id| async move { run_history(id.ok_or_else(not_found)?).await });
    // The bias report is read with the rest and then every 15 s. Its first reading is awaited
    // here, not in a `Transition` of its own inside the live part: that one was streamed in
    // after the page, and a completed run's page opened by URL failed to hydrate there (the
    // panic left its links dead).
    let bias_tick = RwSignal::new(0u32);
    every(Duration::from_secs(15), move || bias_tick.update(|n| *n += 1));
    let bias = Resource::new(
        move || (id(), bias_tick.get()),
        move |(id, _)| async move { run_bias(id.ok_or_else(not_found)?).await },
    );
    view! {
        <Suspense fallback=|| view! { <p class="muted">"Loading the run…"</p> }>
            {move || Suspend::new(async move {
                let (snapshot, history, _) = (snapshot.await, history.await, bias.await);
                match (snapshot, history) {
                    (Err(e), _) | (_, Err(e)) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    (Ok(snapshot), Ok(history)) => view! { <LiveRun snapshot history bias/> }.into_any(),
                }
            })}
        </Suspense>
    }
}

#[component]
fn LiveRun(
    snapshot: RunSnapshot,
    history: Vec<ChartPoint>,
    bias: Resource<Result<BiasReport, crate::AppError>>,
) -> AnyView {
    let run_id = snapshot.id;
    let name = snapshot.name.clone();
    let snap = RwSignal::new(Some(snapshot));
    let points = RwSignal::new(history);
    let connected = RwSignal::new(false);
    live::follow(run_id, snap, points, connected);

    let control = ServerAction::<ControlRun>::new();
    // A control answers with the new status; show it at once rather than at the next snapshot.
    Effect::new(move |_| {
        if let Some(Ok(status)) = control.value().get() {
            snap.update(|s| {
                if let Some(s) = s {
                    s.status = status;
                }
            });
        }
    });
    let s = move || snap.get().expect("a snapshot is always present");
    let status = move || s().status;
    let counts = Signal::derive(move || s().counts);

    let act = move |action: RunAction, question: Option<&'static str>| {
        move |_| {
            if question.is_none_or(confirm) {
                control.dispatch(ControlRun { id: run_id, action });
            }
        }
    };
    let control_error = move || control.value().get().and_then(|r| r.err()).map(|e| e.to_string());

    view! {
        <Title text=name.clone()/>
        <div class="page-head">
            <h1>{name}</h1>
            <span class=move || format!("badge status-{}", status().as_str()) data-testid="run-status">{move || status().as_str()}</span>
            <span class="live-dot" class:on=move || connected.get() title=move || if connected.get() { "live" } else { "not connected; retrying" }></span>
            <div class="spacer"></div>
            <a class="button" href=format!("/acceptance/runs/{run_id}") data-testid="run-acceptance">"Acceptance"</a>
            <a class="button" href=format!("/runs/new?purpose=evaluation&source_run={run_id}")
                title="Send these prompts, each in its thinking mode, to a server running a draft">"Evaluate a draft on these prompts"</a>
            <Show when=move || status() == RunStatus::Running>
                <button on:click=act(RunAction::Pause, None) data-testid="pause">"Pause"</button>
            </Show>
            <Show when=move || status() == RunStatus::Paused>
                <button class="primary" on:click=act(RunAction::Resume, None) data-testid="resume">"Resume"</button>
            </Show>
            <Show when=move || matches!(status(), RunStatus::Running | RunStatus::Paused)>
                <button class="danger" on:click=act(RunAction::Cancel, Some("Cancel this run? Requests in flight stop; finished samples are kept.")) data-testid="cancel">"Cancel"</button>
            </Show>
        </div>
        <Show when=move || control_error().is_some()><p class="error" role="alert">{control_error}</p></Show>
        {move || draining_note(status(), counts.get().running).map(|note| view! {
            <p class="muted small" data-testid="pause-draining">{note}</p>
        })}
        {move || {
            let alerts = s().alerts;
            (!alerts.is_empty()).then(|| view! {
                <div class="banner alert" role="alert" data-testid="alerts">
                    {alerts.into_iter().map(|a| view! { <p><strong>{a.kind.as_str().replace('_', " ")}</strong> ": " {a.message}</p> }).collect_view()}
                </div>
            })
        }}
        <p class="muted small">
            {move || format!("{} · dataset {} · started by {} ", s().settings.model, s().dataset, s().created_by.unwrap_or_else(|| "—".into()))}
            {move || view! { <RelativeTime at=s().created_at/> }}
        </p>
        <ProgressBar counts/>
        <div class="kpis" data-testid="kpis">
            <Kpi label="done" testid="done" value=Signal::derive(move || format!("{} / {}", counts.get().finished(), counts.get().total()))/>
            {SampleState::OUTCOMES.into_iter().chain([SampleState::Running, SampleState::Pending]).map(|state| view! {
                <Kpi label=state.as_str() testid=state.as_str() value=Signal::derive(move || counts.get().get(state).to_string())/>
            }).collect_view()}
            <Kpi label="requests/s" testid="rps" value=Signal::derive(move || compact(s().requests_per_s))/>
            <Kpi label="client tokens/s" testid="tps" value=Signal::derive(move || compact(s().client_tokens_per_s))/>
            <Kpi label="ETA" testid="eta" value=Signal::derive(move || s().eta_secs.map(duration_text).unwrap_or_else(|| "—".into()))/>
            <Kpi label="completion tokens mean · p50 · p95" testid="lengths" value=Signal::derive(move || {
                let c = s().completion;
                let f = |v: Option<f64>| v.map(|v| format!("{v:.0}")).unwrap_or_else(|| "—".into());
                format!("{} · {} · {}", f(c.mean), f(c.p50), f(c.p95))
            })/>
        </div>
        <section class="panel">
            <h2>"Endpoints"</h2>
            <table class="data" data-testid="run-endpoints">
                <thead><tr>
                    <th>"Endpoint"</th><th class="num">"In flight / limit"</th><th>"Why this limit"</th>
                    <th class="num">"Prompt tok/s"</th><th class="num">"Generation tok/s"</th>
                    <th class="num">"Running"</th><th class="num">"Waiting"</th><th class="num">"KV cache"</th>
                </tr></thead>
                <tbody>{move || s().endpoints.into_iter().map(|e| view! { <EndpointRow e/> }).collect_view()}</tbody>
            </table>
        </section>
        <section class="panel">
            <h2>"Throughput"</h2>
            <ThroughputChart points=points/>
        </section>
        <div class="two-col">
            <section class="panel">
                <h2>"Attempts per finished sample"</h2>
                {move || {
                    let attempts = s().attempts;
                    let max = attempts.iter().map(|(_, n)| *n).max().unwrap_or(1).max(1);
                    view! {
                        <div class="bars" data-testid="attempts">
                            {attempts.into_iter().map(|(tries, n)| view! {
                                <div class="bar-row">
                                    <span>{format!("{tries} {}", if tries == 1 { "try" } else { "tries" })}</span>
                                    <span class="bar" style=format!("width:{:.1}%", n as f64 / max as f64 * 100.0)></span>
                                    <span class="num">{n}</span>
                                </div>
                            }).collect_view()}
                        </div>
                    }
                }}
            </section>
            <section class="panel">
                <h2>"Latest errors (15 min)"</h2>
                // A `Show`, not a closure choosing between two views: the server rendered the
                // closure's last-child branch without the marker hydration looks for, and a
                // completed run's page opened by URL panicked there and went dead.
                <Show when=move || !s().errors.is_empty() fallback=|| view! { <p class="muted">"None."</p> }>
                    <table class="data compact" data-testid="errors">
                        <thead><tr><th>"Kind"</th><th class="num">"Count"</th><th>"Last message"</th><th>"Last"</th></tr></thead>
                        <tbody>{move || s().errors.into_iter().map(|g| view! {
                            <tr><td><code>{g.kind}</code></td><td class="num">{g.count}</td>
                                <td class="small">{g.last_message}</td><td><RelativeTime at=g.last_at/></td></tr>
                        }).collect_view()}</tbody>
                    </table>
                </Show>
            </section>
        </div>
        {move || bias.get().and_then(Result::ok).map(|report| view! { <BiasView report/> })}
        <div class="two-col">
            <section class="panel">
                <h2>"Settings"</h2>
                {move || view! { <SettingsList snapshot=s()/> }}
            </section>
            <RetryPanel run_id counts/>
        </div>
    }
    .into_any()
}

/// A paused run sends nothing new, but the requests already at the server run to their end
/// (their output is kept): until they have, the page says so, rather than showing "paused"
/// beside a running count that is still moving.
fn draining_note(status: RunStatus, running: i64) -> Option<String> {
    (status == RunStatus::Paused && running > 0).then(|| {
        let what = if running == 1 { "sample is" } else { "samples are" };
        format!("Pausing: nothing new is sent; {running} {what} still running, and will finish and be kept.")
    })
}

#[component]
fn Kpi(label: &'static str, testid: &'static str, value: Signal<String>) -> impl IntoView {
    view! {
        <div class="kpi" data-testid=format!("kpi-{testid}")>
            <span class="value">{move || value.get()}</span>
            <span class="label">{label}</span>
        </div>
    }
}

#[component]
fn EndpointRow(e: EndpointLive) -> impl IntoView {
    let opt = |v: Option<f64>| v.map(compact).unwrap_or_else(|| "—".into());
    let int = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_else(|| "—".into());
    view! {
        <tr>
            <td>
                {e.name.clone()} " "
                {if e.healthy { view! { <span class="badge ok">"up"</span> }.into_any() } else { view! { <span class="badge bad">"down"</span> }.into_any() }}
            </td>
            <td class="num">{format!("{} / {}", e.in_flight, e.concurrency_limit)}</td>
            <td class="small">{e.limit_reason.clone()} " " <span class="muted"><RelativeTime at=e.limit_changed_at/></span></td>
            <td class="num">{opt(e.prompt_tps)}</td>
            <td class="num">{opt(e.generation_tps)}</td>
            <td class="num">{int(e.running)}</td>
            <td class="num">{int(e.waiting)}</td>
            <td class="num">{e.kv_usage.map(|k| format!("{:.0}%", k * 100.0)).unwrap_or_else(|| "—".into())}</td>
        </tr>
    }
}

#[component]
fn SettingsList(snapshot: RunSnapshot) -> impl IntoView {
    let s = snapshot.settings;
    let opt = |v: Option<String>| v.unwrap_or_else(|| "server default".into());
    let rows: Vec<(&str, String)> = vec![
        ("model", s.model.clone()),
        ("max_tokens", s.max_tokens.to_string()),
        ("temperature", opt(s.temperature.map(|v| v.to_string()))),
        ("top_p", opt(s.top_p.map(|v| v.to_string()))),
        ("seed", opt(s.seed.map(|v| v.to_string()))),
        (
            "thinking",
            match s.thinking {
                Thinking::On => "on".into(),
                Thinking::Off => "off".into(),
                Thinking::Mix { on_ratio } => format!("{:.0}% of samples", on_ratio * 100.0),
                Thinking::ServerDefault => "server default".into(),
                Thinking::AsSource => "as in the source run or export".into(),
            },
        ),
        ("turns", s.turns.describe().to_string()),
        (
            "concurrency",
            match s.concurrency {
                Concurrency::Adaptive { min, max } => {
                    format!("adaptive, {min}–{max} per endpoint, weight {} on shared endpoints", s.weight)
                }
                Concurrency::Fixed { limit } => format!("fixed, {limit} per endpoint"),
            },
        ),
        ("idle timeout", format!("{} s", s.idle_timeout_secs)),
        ("deadline", s.deadline_secs.map(|d| format!("{d} s")).unwrap_or_else(|| "none".into())),
        ("attempts", s.max_attempts.to_string()),
        ("system prompt", s.system_prompt.clone().unwrap_or_else(|| "—".into())),
    ];
    view! {
        <dl class="settings">
            {rows.into_iter().map(|(k, v)| view! { <dt>{k}</dt><dd>{v}</dd> }).collect_view()}
        </dl>
    }
}

/// Re-queues failed and timed-out samples with changed settings; earlier tries stay in history.
#[component]
fn RetryPanel(run_id: i64, counts: Signal<domain::dashboard::StateCounts>) -> impl IntoView {
    let retry = ServerAction::<RetryRun>::new();
    let form = RwSignal::new(RetryForm {
        states: vec![SampleState::Failed, SampleState::TimedOut],
        ..Default::default()
    });
    let toggle = move |state: SampleState| {
        move |ev: leptos::ev::Event| {
            let on = event_target_checked(&ev);
            form.update(|f| {
                f.states.retain(|s| *s != state);
                if on {
                    f.states.push(state);
                }
            });
        }
    };
    let text = |get: fn(&RetryForm) -> &String, set: fn(&mut RetryForm, String)| {
        (
            move || form.with(|f| get(f).clone()),
            move |ev: leptos::ev::Event| form.update(|f| set(f, event_target_value(&ev))),
        )
    };
    let (idle, set_idle) = text(|f| &f.idle_timeout_secs, |f, v| f.idle_timeout_secs = v);
    let (conc, set_conc) = text(|f| &f.fixed_concurrency, |f, v| f.fixed_concurrency = v);
    let (tokens, set_tokens) = text(|f| &f.max_tokens, |f, v| f.max_tokens = v);
    let (contains, set_contains) = text(|f| &f.error_contains, |f, v| f.error_contains = v);
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        retry.dispatch(RetryRun { id: run_id, form: form.get_untracked() });
    };
    let result = move || {
        retry.value().get().map(|r| match r {
            Ok(n) => {
                view! { <p class="ok-note">{format!("{n} samples are back in the queue.")}</p> }.into_any()
            }
            Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
        })
    };
    view! {
        <section class="panel">
            <h2>"Retry pass"</h2>
            <form class="stack" on:submit=submit data-testid="retry">
                <fieldset class="checks">
                    <legend>"Re-queue"</legend>
                    {[SampleState::Failed, SampleState::TimedOut, SampleState::Truncated, SampleState::Empty].into_iter().map(|state| view! {
                        <label class="check">
                            <input type="checkbox" prop:checked=move || form.with(|f| f.states.contains(&state)) on:change=toggle(state)/>
                            {move || format!("{} ({})", state.as_str(), counts.get().get(state))}
                        </label>
                    }).collect_view()}
                </fieldset>
                <label>"Only errors containing" <input prop:value=contains on:input=set_contains placeholder="any error"/></label>
                <div class="row">
                    <label>"Idle timeout (s)" <input type="number" prop:value=idle on:input=set_idle placeholder="unchanged"/></label>
                    <label>"Fixed concurrency" <input type="number" prop:value=conc on:input=set_conc placeholder="unchanged"/></label>
                    <label>"max_tokens" <input type="number" prop:value=tokens on:input=set_tokens placeholder="unchanged"/></label>
                </div>
                <div><button type="submit" disabled=move || retry.pending().get()>"Re-queue"</button></div>
                {result}
            </form>
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_paused_run_says_what_is_still_running_until_it_has_drained() {
        assert_eq!(draining_note(RunStatus::Running, 8), None);
        assert_eq!(draining_note(RunStatus::Paused, 0), None);
        let note = draining_note(RunStatus::Paused, 8).unwrap();
        assert!(note.contains("8 samples are still running"), "{note}");
        assert!(draining_note(RunStatus::Paused, 1).unwrap().contains("1 sample is still running"));
    }
}
