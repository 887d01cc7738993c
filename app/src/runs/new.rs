//! The new-run form. Every field is sent as typed; the server parses and checks it (against the
//! endpoints themselves too) and answers with everything to change at once.

use super::api::{get_form_choices, CreateRun, FormChoices};
use crate::acceptance::api::weighted_quotas;
use crate::components::fields::{Choice, Field};
use domain::acceptance::CategoryQuota;
use domain::run_form::RunForm;
use domain::units::thousands;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};

#[component]
pub fn NewRunPage() -> impl IntoView {
    let choices = Resource::new(|| (), |_| get_form_choices());
    view! {
        <Title text="New run"/>
        <h1>"New run"</h1>
        <Transition fallback=|| view! { <p class="muted">"Loading datasets and endpoints…"</p> }>
            {move || Suspend::new(async move {
                match choices.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(choices) if choices.datasets.is_empty() || choices.endpoints.is_empty() => view! {
                        <p class="empty">
                            "A run needs a dataset that finished importing and a registered endpoint. "
                            <a href="/datasets">"Datasets"</a> " · " <a href="/endpoints">"Endpoints"</a>
                        </p>
                    }.into_any(),
                    Ok(choices) => view! { <RunFormView choices/> }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn RunFormView(choices: FormChoices) -> impl IntoView {
    // `?purpose=evaluation` opens the form to evaluate a draft; `&source_run=ID` on that run's
    // prompts, each in its mode there.
    let query = use_query_map().get_untracked();
    let evaluating = RwSignal::new(query.get("purpose").as_deref() == Some("evaluation"));
    let source_run = query.get("source_run").and_then(|v| v.parse::<i64>().ok());
    let mut initial = RunForm {
        dataset_id: choices.datasets.first().map(|d| d.id),
        endpoint_ids: choices.endpoints.iter().take(1).map(|e| e.id).collect(),
        model: choices
            .endpoints
            .iter()
            .flat_map(|e| e.models.first())
            .map(|m| m.id.clone())
            .next()
            .unwrap_or_default(),
        ..RunForm::with_defaults()
    };
    if let Some(run) = source_run.and_then(|id| choices.runs.iter().find(|r| r.id == id)) {
        initial.selection = "run".into();
        initial.source_run_id = Some(run.id);
        initial.dataset_id = Some(run.dataset_id);
        initial.thinking = "as_source".into();
    }
    let form = RwSignal::new(initial);
    let create = ServerAction::<CreateRun>::new();
    let navigate = use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(id)) = create.value().get() {
            navigate(&format!("/runs/{id}"), Default::default());
        }
    });
    let datasets = StoredValue::new(choices.datasets);
    let endpoints = StoredValue::new(choices.endpoints);
    let runs = StoredValue::new(choices.runs);
    let exports = StoredValue::new(choices.exports);
    // The quota per category a weighted draw takes, shown before the run starts.
    let quota_inputs = move || {
        form.with(|f| {
            let count = f.sample_count.trim().parse::<u64>().ok()?;
            (f.selection == "weighted").then_some((f.dataset_id?, f.weighted_evaluation_id?, count))
        })
    };
    let quotas = Resource::new(quota_inputs, |inputs| async move {
        match inputs {
            Some((dataset, evaluation, count)) => weighted_quotas(dataset, evaluation, count).await.map(Some),
            None => Ok(None),
        }
    });
    let categories = move || {
        let id = form.with(|f| f.dataset_id);
        datasets.with_value(|ds| {
            ds.iter().find(|d| Some(d.id) == id).map(|d| d.categories.clone()).unwrap_or_default()
        })
    };
    let models = move || {
        let chosen = form.with(|f| f.endpoint_ids.clone());
        let mut models: Vec<String> = endpoints.with_value(|es| {
            es.iter()
                .filter(|e| chosen.contains(&e.id))
                .flat_map(|e| e.models.iter().map(|m| m.id.clone()))
                .collect()
        });
        models.sort();
        models.dedup();
        models
    };
    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        create.dispatch(CreateRun { form: form.get_untracked() });
    };
    let error = move || create.value().get().and_then(|r| r.err()).map(|e| e.to_string());
    let is =
        move |field: fn(&RunForm) -> &String, value: &'static str| move || form.with(|f| field(f) == value);

    view! {
        <form class="stack run-form" on:submit=submit data-testid="new-run">
            <section class="panel">
                <h2>"Purpose"</h2>
                <label class="check">
                    <input type="checkbox" name="evaluate" prop:checked=move || evaluating.get()
                        on:change=move |ev| {
                            let on = event_target_checked(&ev);
                            evaluating.set(on);
                            if !on {
                                form.update(|f| { f.draft_name.clear(); f.draft_revision.clear(); f.draft_trained_on = None; });
                            }
                        }/>
                    "Evaluate a draft: the endpoints serve the target with the draft, and the run measures its acceptance"
                </label>
                <Show when=move || evaluating.get()>
                    <div class="row">
                        <Field form label="Draft name" name="draft_name" get=|f| &f.draft_name set=|f, v| f.draft_name = v hint="eagle3-qwen3-8b"/>
                        <Field form label="Revision" name="draft_revision" get=|f| &f.draft_revision set=|f, v| f.draft_revision = v hint="step-4000 (optional)"/>
                        <label>
                            "Trained on export"
                            <select name="draft_trained_on" on:change=move |ev| {
                                let id = event_target_value(&ev).parse::<i64>().ok();
                                form.update(|f| f.draft_trained_on = id);
                            }>
                                <option value="">"none recorded (a starting draft)"</option>
                                {exports.get_value().into_iter().map(|e| {
                                    let id = e.id;
                                    view! { <option value=id selected=move || form.with(|f| f.draft_trained_on == Some(id))>{format!("export #{id}")}</option> }
                                }).collect_view()}
                            </select>
                        </label>
                    </div>
                    <p class="muted small">
                        "Start vLLM with --speculative-config naming the draft and --per-request-spec-decode-metrics summary; "
                        "the run checks both before it starts. Send an earlier run's prompts to compare drafts prompt by prompt. "
                        "The export the revision was trained on puts it in the loop's lineage (Acceptance → The loop)."
                    </p>
                </Show>
            </section>
            <section class="panel">
                <h2>"What to generate"</h2>
                <Field form label="Name" name="name" get=|f| &f.name set=|f, v| f.name = v hint="qwen3-8b sharegpt regen"/>
                <label>
                    "Dataset"
                    <select name="dataset" on:change=move |ev| form.update(|f| {
                        f.dataset_id = event_target_value(&ev).parse().ok();
                        f.categories.clear();
                    })>
                        {datasets.get_value().into_iter().map(|d| {
                            let id = d.id;
                            view! { <option value=id selected=move || form.with(|f| f.dataset_id == Some(id))>
                                {format!("{} ({} rows)", d.name, d.rows)}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <Choice form label="Rows" name="selection" get=|f| &f.selection set=|f, v| f.selection = v
                    options=&[("all", "all rows"), ("categories", "only some categories"), ("sample", "a random sample"),
                              ("run", "an earlier run's prompts"), ("export", "an export's prompts"),
                              ("weighted", "toward an evaluation's weakest categories")]/>
                <Show when=is(|f| &f.selection, "run")>
                    <label>
                        "Run"
                        <select name="source_run" on:change=move |ev| {
                            let id = event_target_value(&ev).parse::<i64>().ok();
                            let dataset = runs.with_value(|rs| rs.iter().find(|r| Some(r.id) == id).map(|r| r.dataset_id));
                            form.update(|f| {
                                f.source_run_id = id;
                                if dataset.is_some() { f.dataset_id = dataset; }
                                if f.thinking == "server_default" { f.thinking = "as_source".into(); }
                            });
                        }>
                            <option value="" selected=move || form.with(|f| f.source_run_id.is_none())>"choose a run"</option>
                            {runs.get_value().into_iter().map(|r| {
                                let id = r.id;
                                let label = match &r.draft {
                                    Some(d) => format!("#{id} {} (evaluation of {}, {} samples)", r.name, d.describe(), r.samples),
                                    None => format!("#{id} {} ({} samples)", r.name, r.samples),
                                };
                                view! { <option value=id selected=move || form.with(|f| f.source_run_id == Some(id))>{label}</option> }
                            }).collect_view()}
                        </select>
                    </label>
                </Show>
                <Show when=is(|f| &f.selection, "export")>
                    <div class="row">
                        <label>
                            "Export"
                            <select name="source_export" on:change=move |ev| {
                                let id = event_target_value(&ev).parse::<i64>().ok();
                                form.update(|f| f.source_export_id = id);
                            }>
                                <option value="">"choose a finished export"</option>
                                {exports.get_value().into_iter().map(|e| {
                                    let id = e.id;
                                    let splits = e.splits.iter()
                                        .map(|(split, _, rows)| format!("{} {}", split.as_str(), thousands(*rows)))
                                        .collect::<Vec<_>>().join(", ");
                                    view! { <option value=id selected=move || form.with(|f| f.source_export_id == Some(id))>{format!("export #{id} ({splits})")}</option> }
                                }).collect_view()}
                            </select>
                        </label>
                        <Choice form label="Split" name="source_split" get=|f| &f.source_split set=|f, v| f.source_split = v
                            options=&[("validation", "validation (not trained on)"), ("train", "train")]/>
                    </div>
                    <p class="muted small">"Choose the dataset the export's runs drew from; an export of several datasets is sent one dataset's run at a time."</p>
                </Show>
                <Show when=is(|f| &f.selection, "weighted")>
                    <div class="row">
                        <label>
                            "Evaluation"
                            <select name="weighted_evaluation" on:change=move |ev| {
                                let id = event_target_value(&ev).parse::<i64>().ok();
                                form.update(|f| f.weighted_evaluation_id = id);
                            }>
                                <option value="">"choose an evaluation"</option>
                                {runs.get_value().into_iter().filter_map(|r| {
                                    let draft = r.draft.clone()?;
                                    let id = r.id;
                                    Some(view! { <option value=id selected=move || form.with(|f| f.weighted_evaluation_id == Some(id))>{format!("#{id} {} ({})", r.name, draft.describe())}</option> })
                                }).collect_view()}
                            </select>
                        </label>
                        <Field form label="Rows to draw" name="sample_count" kind="number" get=|f| &f.sample_count set=|f, v| f.sample_count = v/>
                        <Field form label="Seed" name="sample_seed" kind="number" get=|f| &f.sample_seed set=|f, v| f.sample_seed = v/>
                    </div>
                    <Transition fallback=|| view! { <p class="muted">"Weighing the categories…"</p> }>
                        {move || Suspend::new(async move {
                            match quotas.await {
                                Ok(Some(quotas)) => view! { <QuotaTable quotas/> }.into_any(),
                                Ok(None) => view! { <p class="muted small">"Choose an evaluation and a number of rows to see each category's quota."</p> }.into_any(),
                                Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                            }
                        })}
                    </Transition>
                </Show>
                <Show when=is(|f| &f.selection, "categories")>
                    <fieldset class="checks">
                        <legend>"Categories"</legend>
                        {move || categories().into_iter().map(|(category, n)| {
                            let c = category.clone();
                            let checked = move || form.with(|f| f.categories.contains(&c));
                            let c = category.clone();
                            view! {
                                <label class="check">
                                    <input type="checkbox" prop:checked=checked on:change=move |ev| {
                                        let on = event_target_checked(&ev);
                                        form.update(|f| {
                                            f.categories.retain(|x| x != &c);
                                            if on { f.categories.push(c.clone()); }
                                        });
                                    }/>
                                    {format!("{category} ({n})")}
                                </label>
                            }
                        }).collect_view()}
                    </fieldset>
                </Show>
                <Show when=is(|f| &f.selection, "sample")>
                    <div class="row">
                        <Field form label="Rows to sample" name="sample_count" kind="number" get=|f| &f.sample_count set=|f, v| f.sample_count = v/>
                        <Field form label="Seed" name="sample_seed" kind="number" get=|f| &f.sample_seed set=|f, v| f.sample_seed = v/>
                    </div>
                </Show>
                <Choice form label="Turns to regenerate" name="turns" get=|f| &f.turns set=|f, v| f.turns = v
                    options=&[("last_assistant", "the last assistant turn, given the turns before it"),
                              ("first_user", "the answer to the first user turn only"),
                              ("every_assistant", "every assistant turn in order")]/>
                <label>
                    "System prompt"
                    <textarea name="system_prompt" rows="2" placeholder="optional; replaces the dataset's system turn"
                        prop:value=move || form.with(|f| f.system_prompt.clone())
                        on:input=move |ev| form.update(|f| f.system_prompt = event_target_value(&ev))></textarea>
                </label>
            </section>
            <section class="panel">
                <h2>"Where and how"</h2>
                <fieldset class="checks">
                    <legend>"Endpoints"</legend>
                    {endpoints.get_value().into_iter().map(|e| {
                        let id = e.id;
                        view! {
                            <label class="check">
                                <input type="checkbox" name="endpoint" value=id
                                    prop:checked=move || form.with(|f| f.endpoint_ids.contains(&id))
                                    on:change=move |ev| {
                                        let on = event_target_checked(&ev);
                                        form.update(|f| {
                                            f.endpoint_ids.retain(|x| *x != id);
                                            if on { f.endpoint_ids.push(id); }
                                        });
                                    }/>
                                {e.name.clone()} " " <code class="small">{e.base_url.clone()}</code>
                            </label>
                        }
                    }).collect_view()}
                </fieldset>
                <label>
                    "Model"
                    <input name="model" list="served-models" required
                        prop:value=move || form.with(|f| f.model.clone())
                        on:input=move |ev| form.update(|f| f.model = event_target_value(&ev))/>
                    <datalist id="served-models">
                        {move || models().into_iter().map(|m| view! { <option value=m/> }).collect_view()}
                    </datalist>
                </label>
                <div class="row">
                    <Field form label="max_tokens" name="max_tokens" kind="number" get=|f| &f.max_tokens set=|f, v| f.max_tokens = v/>
                    <Field form label="temperature" name="temperature" kind="number" get=|f| &f.temperature set=|f, v| f.temperature = v hint="server default"/>
                    <Field form label="top_p" name="top_p" kind="number" get=|f| &f.top_p set=|f, v| f.top_p = v hint="server default"/>
                    <Field form label="seed" name="seed" kind="number" get=|f| &f.seed set=|f, v| f.seed = v hint="none"/>
                </div>
                <div class="row">
                    <Choice form label="Thinking" name="thinking" get=|f| &f.thinking set=|f, v| f.thinking = v
                        options=&[("server_default", "the server's default"), ("on", "on (enable_thinking)"),
                                  ("off", "off"), ("mix", "a mix"), ("as_source", "as in the source run or export")]/>
                    <Show when=is(|f| &f.thinking, "mix")>
                        <Field form label="Share thinking (0–1)" name="thinking_ratio" kind="number" get=|f| &f.thinking_ratio set=|f, v| f.thinking_ratio = v/>
                    </Show>
                </div>
                <div class="row" title="Sent only with rows that offer tools (a dataset's tools column)">
                    <Choice form label="Tool calls" name="tool_choice" get=|f| &f.tool_choice set=|f, v| f.tool_choice = v
                        options=&[("auto", "auto"), ("required", "required (at least one call)"),
                                  ("none", "none (answer in text)")]/>
                    <label class="check">
                        <input type="checkbox" name="parallel_tool_calls" prop:checked=move || form.with(|f| f.parallel_tool_calls)
                            on:change=move |ev| form.update(|f| f.parallel_tool_calls = event_target_checked(&ev))/>
                        " several calls in one turn"
                    </label>
                </div>
                <div class="row">
                    <Choice form label="Concurrency" name="concurrency" get=|f| &f.concurrency set=|f, v| f.concurrency = v
                        options=&[("adaptive", "adaptive (follows the server's load)"), ("fixed", "fixed")]/>
                    <Show when=is(|f| &f.concurrency, "adaptive")
                        fallback=move || view! { <Field form label="Requests per endpoint" name="concurrency_fixed" kind="number" get=|f| &f.concurrency_fixed set=|f, v| f.concurrency_fixed = v/> }>
                        <Field form label="At least" name="concurrency_min" kind="number" get=|f| &f.concurrency_min set=|f, v| f.concurrency_min = v/>
                        <Field form label="At most" name="concurrency_max" kind="number" get=|f| &f.concurrency_max set=|f, v| f.concurrency_max = v/>
                        <Field form label="Weight" name="weight" kind="number" get=|f| &f.weight set=|f, v| f.weight = v
                            hint="against other runs on a shared endpoint"/>
                    </Show>
                </div>
                <div class="row">
                    <Field form label="Idle timeout (s)" name="idle_timeout_secs" kind="number" get=|f| &f.idle_timeout_secs set=|f, v| f.idle_timeout_secs = v/>
                    <Field form label="Deadline per request (s)" name="deadline_secs" kind="number" get=|f| &f.deadline_secs set=|f, v| f.deadline_secs = v hint="none"/>
                    <Field form label="Attempts" name="max_attempts" kind="number" get=|f| &f.max_attempts set=|f, v| f.max_attempts = v/>
                </div>
                <p class="muted small">"A request is cut only when no token arrives for the idle timeout, so long reasoning traces are never lost to a total-time limit."</p>
            </section>
            <Show when=move || error().is_some()>
                <p class="error" role="alert" data-testid="run-error">{error}</p>
            </Show>
            <div><button class="primary" type="submit" disabled=move || create.pending().get()>"Start the run"</button></div>
        </form>
    }
}

/// The quota per category a weighted draw takes: the weaker the draft on a category (the more
/// headroom below the most a step can emit), the more of its rows.
#[component]
fn QuotaTable(quotas: Vec<CategoryQuota>) -> impl IntoView {
    let total: u64 = quotas.iter().map(|q| q.quota).sum();
    view! {
        <table class="data compact" data-testid="quota-preview">
            <caption>{format!("{} rows by category", thousands(total as i64))}</caption>
            <thead><tr><th>"Category"</th><th class="num">"Acceptance"</th><th class="num">"Headroom"</th><th class="num">"Rows there"</th><th class="num">"Quota"</th></tr></thead>
            <tbody>
                {quotas.into_iter().map(|q| {
                    let category = q.category.clone().unwrap_or_else(|| "(none)".into());
                    let key = category.clone();
                    view! {
                        <tr data-category=key>
                            <th scope="row">{category}</th>
                            <td class="num">{q.acceptance.map_or_else(|| "not measured".into(), |a| format!("{a:.2}"))}</td>
                            <td class="num">{format!("{:.2}", q.headroom)}</td>
                            <td class="num">{thousands(q.available as i64)}</td>
                            <td class="num" data-testid="quota">{thousands(q.quota as i64)}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}
