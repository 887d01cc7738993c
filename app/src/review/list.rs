//! `/review`: the sample list. The filter is the URL query; counts per value sit beside it, and
//! each value is a link that sets (or clears) that filter. Pages are fetched by key (`after`).
//! Keyboard: j/k move the selection, Enter or o opens it.

use super::{
    api::{bulk_apply, bulk_count, flag_reasons, list_samples, sample_facets},
    filter_from, format, keys, query_string,
};
use crate::AppError;
use domain::{
    review::{Decision, FacetValue, Facets, FlagReason, SampleFilter, SortKey},
    Role, Viewer,
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::{
    components::{Form, A},
    hooks::{use_navigate, use_query_map},
    NavigateOptions,
};

#[component]
pub fn ReviewListPage() -> impl IntoView {
    let query = use_query_map();
    let filter = Memo::new(move |_| query.with(filter_from));
    let after = Memo::new(move |_| query.with(|q| q.get("after")));
    // Bumped after a bulk action, so the list and its counts show the new decisions.
    let changed = RwSignal::new(0u32);
    let page = Resource::new(
        move || (filter.get(), after.get(), changed.get()),
        |(filter, after, _)| async move {
            match filter {
                Ok(f) => list_samples(f, after).await,
                Err(e) => Err(AppError::Invalid(e)),
            }
        },
    );
    let facets = Resource::new(
        move || (filter.get(), changed.get()),
        |(filter, _)| async move {
            match filter {
                Ok(f) => sample_facets(f).await,
                Err(e) => Err(AppError::Invalid(e)),
            }
        },
    );
    // The flags' labels, for the list and the bulk panel's reasons.
    let reasons = Resource::new(|| (), |_| flag_reasons());
    let selected = RwSignal::new(0usize);
    let ids = RwSignal::new(Vec::<i64>::new());
    Effect::new(move |_| {
        if let Some(Ok(p)) = page.get() {
            ids.set(p.rows.iter().map(|r| r.id).collect());
            selected.set(0);
        }
    });
    let navigate = use_navigate();
    keys::on_shortcut(move |key| {
        let count = ids.with_untracked(Vec::len);
        match key {
            "j" if count > 0 => selected.update(|s| *s = (*s + 1).min(count - 1)),
            "k" => selected.update(|s| *s = s.saturating_sub(1)),
            "Enter" | "o" => {
                let Some(id) = ids.with_untracked(|ids| ids.get(selected.get_untracked()).copied()) else {
                    return false;
                };
                let f = filter.get_untracked().unwrap_or_default();
                navigate(
                    &format!("/review/samples/{id}{}", query_string(&f, &[])),
                    NavigateOptions::default(),
                );
            }
            _ => return false,
        }
        true
    });
    let is_engineer = use_context::<Viewer>().is_some_and(|v| v.role.allows(Role::Engineer));

    view! {
        <Title text="Review"/>
        <div class="review-head">
            <h1>"Review"</h1>
            <a
                class="button"
                data-testid="queue-link"
                href=move || {
                    let run = filter.get().ok().and_then(|f| f.run);
                    match run { Some(r) => format!("/review/queue?run={r}"), None => "/review/queue".into() }
                }
            >
                "Queue mode →"
            </a>
        </div>
        {move || filter.get().err().map(|e| view! { <p class="error" role="alert">{format!("This link's filter cannot be read: {e}.")}</p> })}
        <div class="review-layout">
            <aside class="facets" aria-label="Counts per filter value">
                <Transition fallback=|| view! { <p class="muted">"Counting…"</p> }>
                    {move || Suspend::new(async move {
                        match (facets.await, filter.get()) {
                            (Ok(f), Ok(filter)) => view! { <FacetPanel facets=f filter/> }.into_any(),
                            (Err(e), _) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                            (_, Err(_)) => ().into_any(),
                        }
                    })}
                </Transition>
            </aside>
            <section class="review-main">
                {move || filter.get().ok().map(|f| view! { <FilterForm filter=f/> })}
                {is_engineer.then(|| view! { <BulkPanel filter changed reasons/> })}
                <Transition fallback=|| view! { <p class="muted">"Loading samples…"</p> }>
                    {move || Suspend::new(async move {
                        let f = filter.get().unwrap_or_default();
                        let labels = reasons.await.unwrap_or_default();
                        let label = move |code: &String| {
                            labels.iter().find(|r| &r.code == code).map_or_else(|| code.clone(), |r| r.label.clone())
                        };
                        match page.await {
                            Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
                            Ok(p) if p.rows.is_empty() => view! {
                                <section class="empty" data-testid="no-samples">
                                    <p>"No sample matches this filter. Clear a filter on the left, or start a run to generate samples."</p>
                                    <a href="/review">"Clear every filter"</a>
                                </section>
                            }.into_any(),
                            Ok(p) => {
                                let next = p.next.clone().map(|after| format!("/review{}", query_string(&f, &[("after", after)])));
                                let first = after.get().map(|_| format!("/review{}", query_string(&f, &[])));
                                let q = query_string(&f, &[]);
                                // Only runs on a server with a draft have the column's figure;
                                // the others keep its width for the prompt's preview.
                                let measured = p.rows.iter().any(|r| r.acceptance.is_some());
                                view! {
                                    <table class="data samples" data-testid="samples-table">
                                        <thead>
                                            <tr>
                                                <th class="num">"#"</th><th>"run"</th><th>"outcome"</th><th>"finish"</th>
                                                <th>"flags"</th><th>"review"</th><th class="num">"prompt"</th>
                                                <th class="num">"reasoning"</th><th class="num">"completion"</th>
                                                <th class="num">"duration"</th>
                                                {measured.then(|| view! { <th class="num" title="the draft's acceptance length: tokens per verify step">"accept."</th> })}
                                                <th>"prompt text"</th>
                                            </tr>
                                        </thead>
                                        <tbody>
                                            {p.rows.into_iter().enumerate().map(|(i, r)| {
                                                let href = format!("/review/samples/{}{}", r.id, q);
                                                view! {
                                                    <tr data-sample-id=r.id class:selected=move || selected.get() == i>
                                                        <td class="num"><A href=href>{r.id}</A></td>
                                                        <td class="run" title=r.run_name.clone()>{r.run_name.clone()}</td>
                                                        <td><span class=format::outcome_class(r.state)>{r.state.as_str()}</span></td>
                                                        <td class="mono">{r.finish_reason.clone().unwrap_or_default()}</td>
                                                        <td class="flags">{r.auto_flags.iter().chain(r.flags.iter()).map(&label).collect::<Vec<_>>().join(", ")}</td>
                                                        <td>
                                                            <span class=format::review_class(r.review_state)>{r.review_state.as_str()}</span>
                                                            {r.reviewer.clone().map(|u| format!(" {u}"))}
                                                            {r.regenerated_since_decision.then(|| view! {
                                                                " " <span class="badge warn" title="the sample was generated again after a decision; the decision was dropped">"regenerated since your decision"</span>
                                                            })}
                                                        </td>
                                                        <td class="num">{format::tokens(r.prompt_tokens)}</td>
                                                        <td class="num">{format::tokens(r.reasoning_tokens)}</td>
                                                        <td class="num">{format::tokens(r.completion_tokens)}</td>
                                                        <td class="num">{format::millis(r.duration_ms)}</td>
                                                        {measured.then(|| view! { <td class="num" data-testid="acceptance">{r.acceptance.map_or_else(|| "—".into(), |a| format!("{a:.2}"))}</td> })}
                                                        <td class="preview">{r.preview.clone()}</td>
                                                    </tr>
                                                }
                                            }).collect_view()}
                                        </tbody>
                                    </table>
                                    <nav class="pager" aria-label="Pages">
                                        {first.map(|href| view! { <A href=href>"← First page"</A> })}
                                        {next.map(|href| view! { <A href=href attr:data-testid="next-page">"Next page →"</A> })}
                                        <span class="muted">"j / k select · Enter opens"</span>
                                    </nav>
                                }.into_any()
                            }
                        }
                    })}
                </Transition>
            </section>
        </div>
    }
    .into_any()
}

/// A link to the list with one dimension set to `value`, or cleared when it is already set.
fn toggle_href(
    filter: &SampleFilter,
    set: impl Fn(&mut SampleFilter, Option<String>),
    current: Option<String>,
    value: &str,
) -> String {
    let mut f = filter.clone();
    let next = if current.as_deref() == Some(value) { None } else { Some(value.to_string()) };
    set(&mut f, next);
    format!("/review{}", query_string(&f, &[]))
}

#[component]
fn FacetPanel(facets: Facets, filter: SampleFilter) -> impl IntoView {
    let counted = facets.counted;
    let group = |title: &'static str,
                 values: Vec<FacetValue>,
                 current: Option<String>,
                 set: fn(&mut SampleFilter, Option<String>)| {
        let filter = filter.clone();
        view! {
            <div class="facet" data-facet=title>
                <h3>{title}</h3>
                {if values.is_empty() {
                    view! { <p class="muted">"none"</p> }.into_any()
                } else {
                    view! {
                        <ul>
                            {values.into_iter().map(|v| {
                                let active = current.as_deref() == Some(v.value.as_str());
                                let href = toggle_href(&filter, set, current.clone(), &v.value);
                                view! {
                                    <li class:active=active>
                                        <A href=href attr:data-value=v.value.clone()>{v.label}</A>
                                        <span class="num">{format::panel_count(v.count, counted)}</span>
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }}
            </div>
        }
    };
    view! {
        <p class="total" data-testid="total"><strong>{format::panel_count(facets.total, counted)}</strong> " samples"</p>
        {format::estimate_note(counted).map(|note| view! { <p class="muted estimate" data-testid="estimated">{note}</p> })}
        {group("review", facets.review, filter.review.map(|r| r.as_str().to_string()), |f, v| f.review = v.and_then(|v| domain::review::ReviewState::parse(&v)))}
        {group("outcome", facets.outcome, filter.outcome.map(|s| s.as_str().to_string()), |f, v| f.outcome = v.and_then(|v| domain::generation::SampleState::parse(&v)))}
        {group("flag", facets.flag, filter.flag.clone(), |f, v| f.flag = v)}
        {group("finish_reason", facets.finish_reason, filter.finish_reason.clone(), |f, v| f.finish_reason = v)}
        {group("run", facets.run, filter.run.map(|r| r.to_string()), |f, v| f.run = v.and_then(|v| v.parse().ok()))}
        {group("category", facets.category, filter.category.clone(), |f, v| f.category = v)}
        {group("reviewer", facets.reviewer, filter.reviewer.map(|r| r.to_string()), |f, v| f.reviewer = v.and_then(|v| v.parse().ok()))}
    }
    .into_any()
}

/// Search, token ranges and sort. A GET form: submitting it changes the URL, so the filter is
/// a link and the back button undoes it. The facet choices ride along as hidden fields.
#[component]
fn FilterForm(filter: SampleFilter) -> impl IntoView {
    let hidden: Vec<(&'static str, String)> = filter
        .to_query()
        .into_iter()
        .filter(|(k, _)| {
            matches!(*k, "run" | "outcome" | "finish_reason" | "flag" | "review" | "reviewer" | "category")
        })
        .collect();
    let num = |v: Option<i32>| v.map(|v| v.to_string()).unwrap_or_default();
    let range = move |label: &'static str,
                      min_name: &'static str,
                      max_name: &'static str,
                      r: domain::review::TokenRange| {
        view! {
            <fieldset class="range">
                <legend>{label}</legend>
                <input type="number" min="0" name=min_name placeholder="min" value=num(r.min) aria-label=format!("{label} min")/>
                <input type="number" min="0" name=max_name placeholder="max" value=num(r.max) aria-label=format!("{label} max")/>
            </fieldset>
        }
    };
    view! {
        <Form method="GET" action="/review" attr:class="inline-form filters" attr:data-testid="filter-form">
            {hidden.into_iter().map(|(k, v)| view! { <input type="hidden" name=k value=v/> }).collect_view()}
            <label class="grow">
                "Search prompt, reasoning and answer"
                <input type="search" name="q" value=filter.q.clone().unwrap_or_default() placeholder="words, \"a phrase\", -exclude"/>
            </label>
            {range("prompt tokens", "prompt_min", "prompt_max", filter.prompt_tokens)}
            {range("reasoning tokens", "reasoning_min", "reasoning_max", filter.reasoning_tokens)}
            {range("completion tokens", "completion_min", "completion_max", filter.completion_tokens)}
            <fieldset class="range">
                <legend>"acceptance length"</legend>
                <input type="number" min="1" step="0.01" name="acceptance_min" placeholder="min" aria-label="acceptance length min"
                    value=filter.acceptance.min.map(|v| v.to_string()).unwrap_or_default()/>
                <input type="number" min="1" step="0.01" name="acceptance_max" placeholder="max" aria-label="acceptance length max"
                    value=filter.acceptance.max.map(|v| v.to_string()).unwrap_or_default()/>
            </fieldset>
            <label>
                "Sort"
                <select name="sort">
                    {SortKey::ALL.into_iter().map(|k| view! {
                        <option value=k.as_str() selected=k == filter.sort>{k.label()}</option>
                    }).collect_view()}
                </select>
            </label>
            <button class="primary" type="submit">"Apply"</button>
        </Form>
    }
    .into_any()
}

/// Engineers and admins: one decision for every finished sample of the filter, after seeing
/// the count and confirming it.
#[component]
fn BulkPanel(
    filter: Memo<Result<SampleFilter, String>>,
    changed: RwSignal<u32>,
    reasons: Resource<Result<Vec<FlagReason>, AppError>>,
) -> impl IntoView {
    let decision = RwSignal::new(Decision::Reject);
    let reason = RwSignal::new(String::new());
    let note = RwSignal::new(String::new());
    let status = RwSignal::new(None::<Result<String, String>>);
    let busy = RwSignal::new(false);
    let run = move |_| {
        let Ok(f) = filter.get_untracked() else { return };
        let d = decision.get_untracked();
        let flags: Vec<String> = Some(reason.get_untracked()).filter(|r| !r.is_empty()).into_iter().collect();
        let note = Some(note.get_untracked()).filter(|n| !n.trim().is_empty());
        busy.set(true);
        spawn_local(async move {
            let outcome = async {
                let n = bulk_count(f.clone()).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("No finished sample matches this filter; nothing to do.".to_string());
                }
                let verb = match d {
                    Decision::Approve => "Approve",
                    Decision::Reject => "Reject",
                    Decision::Flag => "Flag",
                };
                let question = format!("{verb} {} finished samples matching this filter? Each change is logged and can be undone per sample.", format::count(Some(n)));
                if !crate::users::confirm(&question) {
                    return Err("Cancelled; nothing was changed.".to_string());
                }
                let confirmed = n;
                let n = bulk_apply(f, d, flags, note, confirmed).await.map_err(|e| e.to_string())?;
                changed.update(|c| *c += 1);
                Ok(match confirmed - n {
                    0 => format!("{} samples changed.", format::count(Some(n))),
                    same => format!(
                        "{} samples changed; {} already had this decision.",
                        format::count(Some(n)),
                        format::count(Some(same))
                    ),
                })
            }
            .await;
            status.set(Some(outcome));
            busy.set(false);
        });
    };
    view! {
        <details class="panel bulk" data-testid="bulk">
            <summary>"Bulk action on every finished sample of this filter (engineers)"</summary>
            <div class="inline-form">
                <label>
                    "Decision"
                    <select on:change=move |ev| {
                        if let Some(d) = Decision::parse(&event_target_value(&ev)) {
                            decision.set(d);
                        }
                    }>
                        <option value="reject" selected>"reject"</option>
                        <option value="approve">"approve"</option>
                        <option value="flag">"flag"</option>
                    </select>
                </label>
                <Transition>
                    {move || Suspend::new(async move {
                        let options = reasons.await.unwrap_or_default().into_iter().filter(|r| r.selectable).map(|r| view! {
                            <option value=r.code>{r.label}</option>
                        }).collect_view();
                        view! {
                            <label>
                                "Reason"
                                <select on:change=move |ev| reason.set(event_target_value(&ev))>
                                    <option value="">"(none)"</option>
                                    {options}
                                </select>
                            </label>
                        }
                    })}
                </Transition>
                <label class="grow">"Note" <input on:input=move |ev| note.set(event_target_value(&ev))/></label>
                <button class="danger" on:click=run disabled=move || busy.get()>"Count and confirm…"</button>
            </div>
            {move || status.get().map(|s| match s {
                Ok(text) => view! { <p class="ok-text" role="status">{text}</p> }.into_any(),
                Err(text) => view! { <p class="error" role="alert">{text}</p> }.into_any(),
            })}
        </details>
    }
    .into_any()
}
