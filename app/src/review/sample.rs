//! One sample: the conversation turn by turn, the reasoning (collapsible), the answer as
//! sanitized markdown with a raw-text toggle, metadata, attempts, decisions and the audit log.
//! Keyboard: j/k next/previous, a approve, r reject, f flag (1–9 pick reasons, Enter saves),
//! n note, u undo, v raw text, ? help; quiet while typing.

use super::{
    api::{flag_reasons, neighbour, sample, Decide, Regenerate, Undo},
    filter_from, format, keys, query_string,
};
use crate::components::time::{exact_utc, RelativeTime};
use domain::conversation::ToolCall;
use domain::review::{
    Decision, FlagReason, RenderedText, ReviewEventKind, ReviewEventView, SampleDetail, SampleFilter, Turn,
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::{
    hooks::{use_navigate, use_params_map, use_query_map},
    NavigateOptions,
};

/// Where the sample was opened from, which decides what j/k do.
#[derive(Clone, Debug, PartialEq)]
pub enum Mode {
    /// From the list: j/k walk the filtered list.
    List(Box<SampleFilter>),
    /// Queue mode: a decision brings the next sample.
    Queue,
}

#[component]
pub fn SamplePage() -> impl IntoView {
    let params = use_params_map();
    let query = use_query_map();
    let id = Memo::new(move |_| params.with(|p| p.get("id").and_then(|v| v.parse::<i64>().ok())));
    let filter = Memo::new(move |_| query.with(|q| filter_from(q).unwrap_or_default()));
    view! {
        <Title text="Sample"/>
        {move || match id.get() {
            None => view! { <p class="error">"This link has no valid sample id."</p> }.into_any(),
            Some(id) => {
                let filter = filter.get();
                let back = format!("/review{}", query_string(&filter, &[]));
                view! {
                    <p class="crumbs"><a href=back>"← Samples"</a></p>
                    <SampleView id mode=Mode::List(Box::new(filter)) on_decided=Callback::new(|_| ())/>
                }
                .into_any()
            }
        }}
    }
    .into_any()
}

/// Status line under the decision buttons.
#[derive(Clone, Debug, PartialEq)]
enum Notice {
    Done(String),
    Problem(String),
}

#[component]
pub fn SampleView(id: i64, mode: Mode, on_decided: Callback<()>) -> impl IntoView {
    let refresh = RwSignal::new(0u32);
    let detail = Resource::new(move || refresh.get(), move |_| sample(id));
    let reasons = Resource::new(|| (), |_| flag_reasons());
    let decide = ServerAction::<Decide>::new();
    let undo = ServerAction::<Undo>::new();
    let regenerate = ServerAction::<Regenerate>::new();
    let version = RwSignal::new(None::<i32>);
    let can_undo = RwSignal::new(false);
    let flags = RwSignal::new(Vec::<String>::new());
    let note = RwSignal::new(String::new());
    let flag_open = RwSignal::new(false);
    let help = RwSignal::new(false);
    let raw = RwSignal::new(false);
    let notice = RwSignal::new(None::<Notice>);
    let note_ref = NodeRef::<leptos::html::Textarea>::new();

    Effect::new(move |_| {
        if let Some(Ok(d)) = detail.get() {
            version.set(Some(d.review_version));
            can_undo.set(d.can_undo);
            note.set(d.note.clone().unwrap_or_default());
            flags.set(d.flags.clone());
        }
    });
    Effect::new(move |_| match decide.value().get() {
        Some(Ok(_)) => {
            notice.set(Some(Notice::Done("Saved.".into())));
            flag_open.set(false);
            refresh.update(|n| *n += 1);
            on_decided.run(());
        }
        Some(Err(e)) => notice.set(Some(Notice::Problem(e.to_string()))),
        None => {}
    });
    Effect::new(move |_| match undo.value().get() {
        Some(Ok(_)) => {
            notice.set(Some(Notice::Done("Undone: the previous decision is back.".into())));
            refresh.update(|n| *n += 1);
        }
        Some(Err(e)) => notice.set(Some(Notice::Problem(e.to_string()))),
        None => {}
    });
    Effect::new(move |_| match regenerate.value().get() {
        Some(Ok(message)) => {
            notice.set(Some(Notice::Done(message)));
            refresh.update(|n| *n += 1);
        }
        Some(Err(e)) => notice.set(Some(Notice::Problem(e.to_string()))),
        None => {}
    });

    let act = move |decision: Decision| {
        let Some(v) = version.get_untracked() else { return };
        if decision == Decision::Flag && flags.get_untracked().is_empty() {
            flag_open.set(true);
            notice.set(Some(Notice::Problem("Pick at least one reason (1–9), then press Enter.".into())));
            return;
        }
        let text = note.get_untracked();
        decide.dispatch(Decide {
            id,
            version: v,
            decision,
            flags: if decision == Decision::Approve { vec![] } else { flags.get_untracked() },
            note: (!text.trim().is_empty()).then_some(text),
        });
    };
    let do_undo = move || {
        if let (Some(v), true) = (version.get_untracked(), can_undo.get_untracked()) {
            undo.dispatch(Undo { id, version: v });
        }
    };
    let selectable = move || -> Vec<FlagReason> {
        reasons.get().and_then(Result::ok).unwrap_or_default().into_iter().filter(|r| r.selectable).collect()
    };
    let toggle_flag = move |code: String| {
        flags.update(|f| {
            if let Some(i) = f.iter().position(|c| *c == code) {
                f.remove(i);
            } else {
                f.push(code);
            }
        })
    };

    let navigate = use_navigate();
    let go = {
        let mode = mode.clone();
        move |forward: bool| {
            let Mode::List(filter) = mode.clone() else { return };
            let navigate = navigate.clone();
            spawn_local(async move {
                match neighbour((*filter).clone(), id, forward).await {
                    Ok(Some(next)) => navigate(
                        &format!("/review/samples/{next}{}", query_string(&filter, &[])),
                        NavigateOptions::default(),
                    ),
                    Ok(None) => notice.set(Some(Notice::Done(
                        if forward {
                            "This is the last sample of the list."
                        } else {
                            "This is the first sample of the list."
                        }
                        .into(),
                    ))),
                    Err(e) => notice.set(Some(Notice::Problem(e.to_string()))),
                }
            });
        }
    };

    keys::on_shortcut(move |key| {
        if flag_open.get_untracked() {
            if let Some(n) = key.parse::<usize>().ok().filter(|n| (1..=9).contains(n)) {
                let list = reasons.get_untracked().and_then(Result::ok).unwrap_or_default();
                if let Some(reason) = list.into_iter().filter(|r| r.selectable).nth(n - 1) {
                    toggle_flag(reason.code);
                }
                return true;
            }
            if key == "Enter" {
                act(Decision::Flag);
                return true;
            }
        }
        match key {
            "a" => act(Decision::Approve),
            "r" => act(Decision::Reject),
            "f" => flag_open.update(|open| *open = !*open),
            "u" => do_undo(),
            "v" => raw.update(|r| *r = !*r),
            "?" => help.update(|h| *h = !*h),
            "Escape" => {
                flag_open.set(false);
                help.set(false);
            }
            "n" => {
                if let Some(area) = note_ref.get_untracked() {
                    let _ = area.focus();
                }
            }
            "j" => go(true),
            "k" => go(false),
            _ => return false,
        }
        true
    });

    let in_list = matches!(mode, Mode::List(_));
    view! {
        <div class="sample-view" data-testid="sample-view" data-sample-id=id>
            <div class="sample-main">
                <Transition fallback=|| view! { <p class="muted">"Loading the sample…"</p> }>
                    {move || Suspend::new(async move {
                        match detail.await {
                            Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
                            Ok(d) => view! { <SampleBody d raw/> }.into_any(),
                        }
                    })}
                </Transition>
            </div>
            <aside class="decision panel" aria-label="Decision">
                <div class="decision-buttons">
                    <button class="primary" on:click=move |_| act(Decision::Approve) title="a">"Approve " <kbd>"a"</kbd></button>
                    <button class="danger" on:click=move |_| act(Decision::Reject) title="r">"Reject " <kbd>"r"</kbd></button>
                    <button on:click=move |_| flag_open.update(|o| *o = !*o) title="f">"Flag… " <kbd>"f"</kbd></button>
                    <button on:click=move |_| do_undo() disabled=move || !can_undo.get() title="u">"Undo " <kbd>"u"</kbd></button>
                    {in_list.then(|| view! { <span class="muted keys-hint">"j / k next / previous · ? help"</span> })}
                </div>
                <Show when=move || flag_open.get()>
                    <fieldset class="flag-reasons" data-testid="flag-reasons">
                        <legend>"Reasons (press 1–9, then Enter)"</legend>
                        {move || selectable().into_iter().enumerate().map(|(i, r)| {
                            let code = r.code.clone();
                            let code_for_check = r.code.clone();
                            view! {
                                <label class="check">
                                    <input
                                        type="checkbox"
                                        prop:checked=move || flags.get().contains(&code_for_check)
                                        on:change=move |_| toggle_flag(code.clone())
                                    />
                                    <kbd>{(i + 1).to_string()}</kbd>
                                    {r.label}
                                </label>
                            }
                        }).collect_view()}
                        <button class="primary" on:click=move |_| act(Decision::Flag)>"Flag " <kbd>"Enter"</kbd></button>
                    </fieldset>
                </Show>
                <label>
                    <span>"Note " <kbd>"n"</kbd> <span class="muted">" (saved with the next decision; Esc leaves the field)"</span></span>
                    <textarea
                        node_ref=note_ref
                        rows="2"
                        maxlength="4000"
                        data-testid="note"
                        prop:value=move || note.get()
                        on:input=move |ev| note.set(event_target_value(&ev))
                        on:keydown=move |ev| {
                            if ev.key() == "Escape" {
                                if let Some(area) = note_ref.get_untracked() {
                                    let _ = area.blur();
                                }
                            }
                        }
                    ></textarea>
                </label>
                {move || notice.get().map(|n| match n {
                    Notice::Done(text) => view! { <p class="ok-text" role="status" data-testid="notice">{text}</p> }.into_any(),
                    Notice::Problem(text) => view! { <p class="error" role="alert" data-testid="notice">{text}</p> }.into_any(),
                })}
                <button
                    class="link"
                    on:click=move |_| {
                        if let Some(v) = version.get_untracked() {
                            if crate::users::confirm("Generate this sample again with its run's settings? Its review starts over; earlier tries stay in its history.") {
                                regenerate.dispatch(Regenerate { id, version: v });
                            }
                        }
                    }
                >
                    "Regenerate with the run's settings"
                </button>
            </aside>
            <Show when=move || help.get()>
                <div class="help panel" role="dialog" aria-label="Keyboard shortcuts" data-testid="help">
                    <h2>"Keyboard"</h2>
                    <table>
                        <tr><td><kbd>"j"</kbd>" / "<kbd>"k"</kbd></td><td>"next / previous sample"</td></tr>
                        <tr><td><kbd>"a"</kbd></td><td>"approve"</td></tr>
                        <tr><td><kbd>"r"</kbd></td><td>"reject"</td></tr>
                        <tr><td><kbd>"f"</kbd></td><td>"flag: pick reasons with 1–9, save with Enter"</td></tr>
                        <tr><td><kbd>"n"</kbd></td><td>"write a note (Esc to leave it)"</td></tr>
                        <tr><td><kbd>"u"</kbd></td><td>"undo the last decision"</td></tr>
                        <tr><td><kbd>"v"</kbd></td><td>"answer as raw text / rendered"</td></tr>
                        <tr><td><kbd>"?"</kbd></td><td>"this help (Esc closes)"</td></tr>
                    </table>
                    <p class="muted">"Shortcuts are off while you type in a field."</p>
                </div>
            </Show>
        </div>
    }
    .into_any()
}

#[component]
fn SampleBody(d: SampleDetail, raw: RwSignal<bool>) -> impl IntoView {
    let answer_raw = d.answer.clone().unwrap_or_default();
    let rendered = d.answer_rendered.clone();
    let settings = serde_json::to_string_pretty(&d.run_settings).unwrap_or_default();
    let flags = d.flags.clone();
    let auto_flags = d.auto_flags.clone();
    let reasoning_tokens = d.reasoning_tokens;
    let has_calls = !d.answer_tool_calls.is_empty();
    view! {
        <header class="sample-head">
            <h1>"Sample " {d.id}</h1>
            <span class=format::outcome_class(d.state) data-testid="outcome">{d.state.as_str()}</span>
            <span class=format::review_class(d.review_state) data-testid="review-state">{d.review_state.as_str()}</span>
            {auto_flags.into_iter().map(|f| view! { <span class="badge warn" title="found automatically">{f}</span> }).collect_view()}
            {flags.into_iter().map(|f| view! { <span class="badge" title="chosen by the reviewer">{f}</span> }).collect_view()}
            {d.leased_by_other.clone().map(|who| view! { <span class="badge warn">{format!("{who} is reviewing this in queue mode")}</span> })}
        </header>
        <p class="muted">
            "Run " <a href=format!("/review?run={}", d.run_id)>{d.run_name.clone()}</a>
            " · row " <span class="mono">{d.row_key.clone()}</span>
            {d.category.clone().map(|c| format!(" · category {c}"))}
            {d.reviewer.clone().map(|r| format!(" · decided by {r}"))}
            {d.reviewed_at.map(|at| view! { " " <RelativeTime at/> })}
        </p>
        {d.note.clone().map(|n| view! { <p class="saved-note">"Note: " {n}</p> })}
        {d.regenerated_since.clone().map(|r| view! {
            <p class="regenerated-note" role="status" data-testid="regenerated-since">
                {r.describe()} " "
                {r.decided_at.map(|at| view! { <span class="muted">"Decided " <RelativeTime at/>"."</span> })}
            </p>
        })}
        <section class="conversation" aria-label="Conversation">
            {d.tools.clone().map(|tools| view! { <ToolsOffered tools/> })}
            {d.turns.into_iter().map(|t| view! { <TurnView turn=t/> }).collect_view()}
            <div class="turn turn-assistant generated">
                <div class="role">"assistant · generated"</div>
                {d.reasoning.clone().filter(|r| !r.is_empty()).map(|r| view! {
                    <details class="reasoning" data-testid="reasoning">
                        <summary>"Reasoning · " {format::tokens(reasoning_tokens)} " tokens · " {format::count(Some(r.chars().count() as i64))} " characters"</summary>
                        <pre class="text">{r}</pre>
                    </details>
                })}
                <ToolCalls calls=d.answer_tool_calls.clone()/>
                <div class="answer-tools">
                    <button class="link" on:click=move |_| raw.update(|r| *r = !*r)>
                        {move || if raw.get() { "Show rendered (v)" } else { "Show raw text (v)" }}
                    </button>
                </div>
                {move || {
                    if raw.get() {
                        return view! { <pre class="text" data-testid="answer-raw">{answer_raw.clone()}</pre> }.into_any();
                    }
                    match rendered.clone() {
                        None if has_calls => view! { <p class="muted" data-testid="answer">"No text beside the calls."</p> }.into_any(),
                        None => view! { <p class="muted" data-testid="answer">"No answer came back."</p> }.into_any(),
                        Some(RenderedText::Html(html)) => view! { <div class="markdown" data-testid="answer" inner_html=html></div> }.into_any(),
                        Some(RenderedText::Plain(text)) => view! {
                            <p class="muted">"Over 100,000 characters: shown as plain text."</p>
                            <pre class="text" data-testid="answer">{text}</pre>
                        }.into_any(),
                    }
                }}
            </div>
        </section>
        <super::training::TrainingPanel id=d.id/>
        <section class="panel meta" aria-label="Metadata">
            <h2>"Result"</h2>
            <dl class="meta-grid">
                <dt>"finish_reason"</dt><dd class="mono">{d.finish_reason.clone().unwrap_or_else(|| "–".into())}</dd>
                <dt>"prompt tokens"</dt><dd class="num">{format::tokens(d.prompt_tokens)}</dd>
                <dt>"completion tokens"</dt><dd class="num">{format::tokens(d.completion_tokens)}</dd>
                <dt>"reasoning tokens"</dt><dd class="num" data-testid="reasoning-tokens">{format::tokens(d.reasoning_tokens)}</dd>
                <dt>"answer tokens"</dt><dd class="num" data-testid="answer-tokens">{format::tokens(d.answer_tokens)}</dd>
                {(d.tool_call_tokens.unwrap_or(0) > 0).then(|| view! {
                    <dt>"tool-call tokens"</dt><dd class="num" data-testid="tool-call-tokens">{format::tokens(d.tool_call_tokens)}</dd>
                })}
                <dt>"time to first token"</dt><dd class="num">{format::millis(d.ttft_ms)}</dd>
                <dt>"duration"</dt><dd class="num">{format::millis(d.duration_ms)}</dd>
                <dt>"endpoint"</dt><dd>{d.endpoint.clone().unwrap_or_else(|| "–".into())}</dd>
                <dt>"thinking"</dt><dd>{match d.thinking { Some(true) => "on", Some(false) => "off", None => "server default" }}</dd>
                <dt title="tokens the target emitted per verify step of its speculative-decoding draft">"draft acceptance"</dt>
                <dd class="num" data-testid="sample-acceptance">{d.spec_decode.as_ref().map_or_else(
                    || "not measured".to_string(),
                    |s| format!(
                        "{:.2} ({} accepted of {} drafted over {} steps; by tokens accepted a step: {})",
                        s.length(),
                        s.accepted,
                        s.drafted,
                        s.steps,
                        s.histogram.iter().map(u32::to_string).collect::<Vec<_>>().join(" / "),
                    ),
                )}</dd>
            </dl>
            {d.error.clone().map(|e| view! { <p class="error">"Error: " {e}</p> })}
            <h3>"Attempts"</h3>
            <table class="data attempts">
                <thead><tr><th>"#"</th><th>"result"</th><th>"endpoint"</th><th>"started"</th><th class="num">"tokens"</th><th class="num">"duration"</th><th>"error"</th></tr></thead>
                <tbody>
                    {d.attempts.into_iter().enumerate().map(|(i, a)| view! {
                        <tr>
                            <td class="num">{i + 1}</td>
                            <td>{a.result.clone()} {(!a.counted).then_some(" (not counted)")}</td>
                            <td>{a.endpoint.clone().unwrap_or_default()}</td>
                            <td title=exact_utc(a.finished_at)>{exact_utc(a.started_at)}</td>
                            <td class="num">{format::tokens(a.completion_tokens)}</td>
                            <td class="num">{format::millis(a.duration_ms)}</td>
                            <td>
                                {a.http_status.map(|s| format!("HTTP {s} "))}
                                {a.error_kind.clone().map(|k| format!("{k}: "))}
                                {a.error.clone().unwrap_or_default()}
                            </td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <details>
                <summary>"Run settings"</summary>
                <pre class="text">{settings}</pre>
            </details>
        </section>
        <section class="panel" aria-label="Audit log">
            <h2>"Audit log"</h2>
            <ol class="events" data-testid="audit-log">
                {if d.events.is_empty() {
                    view! { <li class="muted">"No decision yet."</li> }.into_any()
                } else {
                    d.events.into_iter().map(|e| view! { <EventItem e/> }).collect_view().into_any()
                }}
            </ol>
        </section>
    }
    .into_any()
}

#[component]
fn TurnView(turn: Turn) -> impl IntoView {
    if turn.role == "tool" {
        // Nothing here runs a tool: every result is the dataset row's own.
        return view! {
            <div class="turn turn-tool" data-testid="tool-result">
                <div class="role">"tool result · from the source"
                    {turn.tool_call_id.map(|id| view! { " · answers " <span class="mono">{id}</span> })}
                </div>
                <pre class="text mono">{turn.content}</pre>
            </div>
        }
        .into_any();
    }
    view! {
        <div class=format!("turn turn-{}", turn.role)>
            <div class="role">{turn.role.clone()}</div>
            {turn.reasoning.filter(|r| !r.is_empty()).map(|r| view! {
                <details class="reasoning"><summary>"Reasoning"</summary><pre class="text">{r}</pre></details>
            })}
            {(!turn.content.is_empty() || turn.tool_calls.is_empty()).then(|| view! { <pre class="text">{turn.content}</pre> })}
            <ToolCalls calls=turn.tool_calls/>
        </div>
    }
    .into_any()
}

/// The functions the conversation offers, folded: they are long and the same on many rows.
#[component]
fn ToolsOffered(tools: serde_json::Value) -> impl IntoView {
    let names = domain::conversation::tool_names(&tools).unwrap_or_default();
    let pretty = serde_json::to_string_pretty(&tools).unwrap_or_default();
    view! {
        <details class="tools-offered" data-testid="tools">
            <summary>{format!("Tools offered · {}", names.join(", "))}</summary>
            <pre class="text mono">{pretty}</pre>
        </details>
    }
}

/// Each call as its function's name and its arguments, pretty-printed when they are JSON.
#[component]
fn ToolCalls(calls: Vec<ToolCall>) -> impl IntoView {
    calls
        .into_iter()
        .map(|call| {
            let (arguments, valid) = match call.parsed_arguments() {
                Ok(object) => (serde_json::to_string_pretty(&object).unwrap_or_default(), true),
                Err(_) => (call.function.arguments.clone(), false),
            };
            view! {
                <div class="tool-call" data-testid="tool-call">
                    <div class="tool-call-head">
                        "calls " <span class="mono tool-name" data-testid="tool-name">{call.function.name.clone()}</span>
                        <span class="muted mono">" · " {call.id.clone()}</span>
                        {(!valid).then(|| view! { <span class="badge warn">"arguments are not a JSON object"</span> })}
                    </div>
                    <pre class="text mono" data-testid="tool-arguments">{arguments}</pre>
                </div>
            }
        })
        .collect_view()
}

#[component]
fn EventItem(e: ReviewEventView) -> impl IntoView {
    let kind = match e.kind {
        ReviewEventKind::Decision => "decided",
        ReviewEventKind::Bulk => "decided in bulk",
        ReviewEventKind::Undo => "undid",
        ReviewEventKind::Regenerate => "regenerated",
        ReviewEventKind::Requeue => "re-queued by a retry pass",
    };
    view! {
        <li class:undone=e.undone>
            <RelativeTime at=e.at/> " · "
            <strong>{e.actor.unwrap_or_else(|| "someone".into())}</strong> " " {kind} ": "
            {e.from_state.as_str()} " → " <strong>{e.to_state.as_str()}</strong>
            {(!e.to_flags.is_empty()).then(|| format!(" [{}]", e.to_flags.join(", ")))}
            {e.note.map(|n| format!(" — “{n}”"))}
            {e.undone.then_some(" (undone)")}
        </li>
    }
    .into_any()
}
