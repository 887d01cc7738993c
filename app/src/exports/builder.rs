//! The export form: which samples, in what shape, where; a preview of what it would take, and
//! buttons to save it as a preset or export it now.

use super::api::{fetch_export_choices, ExportChoices, PreviewExport, SavePreset, StartExport};
use super::form::ExportForm;
use crate::components::fields::{Choice, Field, GetField};
use domain::export::{ExportPreview, ExportSpec, Layout};
use domain::generation::SampleState;
use domain::trainer::Trainer;
use domain::units::thousands;
use leptos::prelude::*;

#[component]
pub fn Builder(
    form: RwSignal<ExportForm>,
    start: ServerAction<StartExport>,
    save: ServerAction<SavePreset>,
) -> impl IntoView {
    let choices = Resource::new(|| (), |_| fetch_export_choices());
    view! {
        <section class="panel" id="export-form">
            <h2>"New export"</h2>
            <Transition fallback=|| view! { <p class="muted">"Loading runs…"</p> }>
                {move || Suspend::new(async move {
                    match choices.await {
                        Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                        Ok(c) if c.runs.is_empty() => view! {
                            <p class="empty">"Nothing to export yet: " <a href="/runs/new">"start a run"</a> " and come back once it has finished samples."</p>
                        }.into_any(),
                        Ok(choices) => view! { <BuilderForm choices form start save/> }.into_any(),
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn BuilderForm(
    choices: ExportChoices,
    form: RwSignal<ExportForm>,
    start: ServerAction<StartExport>,
    save: ServerAction<SavePreset>,
) -> impl IntoView {
    let preview = ServerAction::<PreviewExport>::new();
    let previewed = RwSignal::new(None::<ExportSpec>);
    // Mistakes found in the browser, before anything is sent.
    let problems = RwSignal::new(Vec::<String>::new());
    let preset_name = RwSignal::new(String::new());
    // Which button's answer is shown: the last one pressed.
    let last = RwSignal::new("");

    let checked = move || -> Option<ExportSpec> {
        match form.get_untracked().to_spec() {
            Ok(spec) => {
                problems.set(Vec::new());
                Some(spec)
            }
            Err(found) => {
                problems.set(found);
                None
            }
        }
    };
    let on_preview = move |_| {
        last.set("preview");
        if let Some(spec) = checked() {
            previewed.set(Some(spec.clone()));
            preview.dispatch(PreviewExport { spec });
        }
    };
    let on_save = move |_| {
        last.set("save");
        let name = preset_name.get_untracked();
        if name.trim().is_empty() {
            problems.set(vec!["give the preset a name".into()]);
            return;
        }
        if let Some(spec) = checked() {
            save.dispatch(SavePreset { name, spec });
        }
    };
    let on_export = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        last.set("export");
        if let Some(spec) = checked() {
            start.dispatch(StartExport { spec });
        }
    };
    let stale = move || {
        let current = form.with(|f| f.to_spec().ok());
        previewed.with(|p| p.is_some() && *p != current)
    };
    let answer = move || {
        let (ok, err) = match last.get() {
            "save" => match save.value().get() {
                Some(Ok(_)) => (Some(format!("Preset {} saved.", preset_name.get_untracked().trim())), None),
                Some(Err(e)) => (None, Some(e.to_string())),
                None => (None, None),
            },
            "export" => match start.value().get() {
                Some(Ok(id)) => {
                    (Some(format!("Export {id} started; follow it under Past exports below.")), None)
                }
                Some(Err(e)) => (None, Some(e.to_string())),
                None => (None, None),
            },
            "preview" => (None, preview.value().get().and_then(|r| r.err()).map(|e| e.to_string())),
            _ => (None, None),
        };
        view! {
            {ok.map(|text| view! { <p class="ok-note" role="status" data-testid="export-form-ok">{text}</p> })}
            {err.map(|text| view! { <p class="error" role="alert" data-testid="export-form-error">{text}</p> })}
        }
    };
    let busy = move || preview.pending().get() || start.pending().get() || save.pending().get();
    let flags = StoredValue::new(choices.flags);
    let runs = StoredValue::new(choices.runs);
    let roots = choices.roots.join(", ");
    let is = move |field: GetField<ExportForm>, value: &'static str| move || form.with(|f| field(f) == value);

    view! {
        <form class="stack export-form" on:submit=on_export data-testid="export-form">
            <div class="export-grid">
                <fieldset class="checks runs-pick">
                    <legend>"Runs"</legend>
                    {runs.get_value().into_iter().map(|r| {
                        let id = r.id;
                        view! {
                            <label class="check">
                                <input type="checkbox" name="run" value=id
                                    prop:checked=move || form.with(|f| f.run_ids.contains(&id))
                                    on:change=move |ev| {
                                        let on = event_target_checked(&ev);
                                        form.update(|f| {
                                            f.run_ids.retain(|x| *x != id);
                                            if on { f.run_ids.push(id); }
                                        });
                                    }/>
                                {r.name.clone()}
                                <span class="muted small">{format!("#{} · {} ok", r.id, thousands(r.ok_samples))}</span>
                            </label>
                        }
                    }).collect_view()}
                </fieldset>
                <div class="stack">
                    <Choice form label="Review states" name="review" get=|f| &f.review set=|f, v| f.review = v
                        options=&[
                            ("not_rejected_or_flagged", "all but rejected or flagged"),
                            ("approved_only", "approved only"),
                            ("not_rejected", "all but rejected"),
                            ("all", "all review states, rejected included"),
                        ]/>
                    <button type="button" class="link" data-testid="approved-only"
                        title="only samples a reviewer approved"
                        disabled=move || form.with(|f| f.review == "approved_only")
                        on:click=move |_| form.update(|f| f.review = "approved_only".into())>
                        "Approved only"
                    </button>
                    <fieldset class="checks">
                        <legend>"Outcomes"</legend>
                        {SampleState::OUTCOMES.into_iter().map(|state| view! {
                            <label class="check">
                                <input type="checkbox" name="outcome" value=state.as_str()
                                    prop:checked=move || form.with(|f| f.outcomes.contains(&state))
                                    on:change=move |ev| {
                                        let on = event_target_checked(&ev);
                                        form.update(|f| {
                                            f.outcomes.retain(|x| *x != state);
                                            if on { f.outcomes.push(state); }
                                        });
                                    }/>
                                {state.as_str()}
                            </label>
                        }).collect_view()}
                    </fieldset>
                    <fieldset class="checks">
                        <legend>"Leave out samples flagged"</legend>
                        {flags.get_value().into_iter().map(|flag| {
                            let code = StoredValue::new(flag.code.clone());
                            view! {
                                <label class="check" title=flag.code.clone()>
                                    <input type="checkbox" name="excluded_flag" value=flag.code.clone()
                                        prop:checked=move || form.with(|f| code.with_value(|c| f.excluded_flags.contains(c)))
                                        on:change=move |ev| {
                                            let on = event_target_checked(&ev);
                                            let c = code.get_value();
                                            form.update(|f| {
                                                f.excluded_flags.retain(|x| *x != c);
                                                if on { f.excluded_flags.push(c); }
                                            });
                                        }/>
                                    {flag.label.clone()}
                                </label>
                            }
                        }).collect_view()}
                    </fieldset>
                </div>
            </div>
            <div class="row">
                <Field form label="Categories (comma-separated)" name="categories" get=|f| &f.categories set=|f, v| f.categories = v hint="every category"/>
                <Field form label="Completion tokens from" name="min_tokens" kind="number" get=|f| &f.min_tokens set=|f, v| f.min_tokens = v hint="no minimum"/>
                <Field form label="to" name="max_tokens" kind="number" get=|f| &f.max_tokens set=|f, v| f.max_tokens = v hint="no maximum"/>
                <Choice form label="Duplicate conversations" name="duplicates" get=|f| &f.duplicates set=|f, v| f.duplicates = v
                    options=&[("remove", "write once"), ("keep", "keep all")]/>
            </div>
            <div class="row">
                <Field form label="Acceptance length from" name="min_acceptance" get=|f| &f.min_acceptance set=|f, v| f.min_acceptance = v hint="no minimum"/>
                <Field form label="to" name="max_acceptance" get=|f| &f.max_acceptance set=|f, v| f.max_acceptance = v hint="no maximum"/>
                <Field form label="Only the weakest of each category (share)" name="weakest" get=|f| &f.weakest set=|f, v| f.weakest = v hint="every sample (e.g. 30%)"/>
            </div>
            <div class="row">
                <Choice form label="Thinking mix" name="thinking" get=|f| &f.thinking set=|f, v| f.thinking = v
                    options=&[("any", "any mode"), ("thinking_only", "thinking only"), ("non_thinking_only", "non-thinking only"), ("ratio", "a share of thinking")]/>
                <Show when=is(|f| &f.thinking, "ratio")>
                    <Field form label="Share thinking (0–1)" name="thinking_share" kind="text" get=|f| &f.thinking_share set=|f, v| f.thinking_share = v hint="0.5"/>
                </Show>
                <Field form label="Validation share (0–0.5)" name="validation_share" get=|f| &f.validation_share set=|f, v| f.validation_share = v hint="none"/>
                <Field form label="Seed" name="seed" kind="number" get=|f| &f.seed set=|f, v| f.seed = v/>
            </div>
            <div class="row">
                <Choice form label="For trainer" name="trainer" get=|f| &f.trainer set=|f, v| f.trainer = v
                    options=&[("", "none: choose the rows yourself"), ("specforge_online", "SpecForge (online, pre-tokenized)"),
                              ("specforge_offline", "SpecForge (offline hidden states)"), ("speculators", "speculators")]/>
                <Show when=is(|f| &f.trainer, "")>
                    <Choice form label="Rows" name="layout" get=|f| &f.layout set=|f, v| f.layout = v
                        options=&[("conversations", "SpecForge conversations"), ("messages", "OpenAI messages"), ("tokenized", "pre-tokenized (input_ids, loss_mask)")]/>
                    <Choice form label="File format" name="file" get=|f| &f.file set=|f, v| f.file = v
                        options=&[("jsonl", "JSONL"), ("parquet", "Parquet (for datasets / pandas)")]/>
                    <Choice form label="Reasoning" name="reasoning" get=|f| &f.reasoning set=|f, v| f.reasoning = v
                        options=&[("field", "reasoning_content field"), ("inline_think", "inline <think>…</think>"), ("omit", "left out")]/>
                </Show>
            </div>
            {move || form.with(|f| Trainer::parse(&f.trainer)).map(|t| view! {
                <ul class="muted small trainer-load" data-testid="trainer-load">
                    <li>{format!("{} reads JSONL {}.", t.label(), match t.layout() {
                        Layout::Tokenized => "pre-tokenized rows, used as written",
                        _ => "conversations, reasoning in reasoning_content and tools as JSON text",
                    })}</li>
                    {t.how_to_load().iter().map(|line| view! { <li><code>{*line}</code></li> }).collect_view()}
                </ul>
            })}
            <Show when=move || form.with(|f| Trainer::parse(&f.trainer).map_or(f.layout == "tokenized", |t| t.layout() == Layout::Tokenized))>
                <div class="row">
                    <Field form label="Tokenizer folder (tokenizer.json, tokenizer_config.json)" name="tokenizer_dir" get=|f| &f.tokenizer_dir set=|f, v| f.tokenizer_dir = v hint="tokenizers/qwen3-8b"/>
                    <Field form label="Max length (tokens)" name="max_length" kind="number" get=|f| &f.max_length set=|f, v| f.max_length = v/>
                    <Choice form label="Longer rows" name="overlong" get=|f| &f.overlong set=|f, v| f.overlong = v
                        options=&[("drop", "drop"), ("truncate", "truncate")]/>
                </div>
                <div class="row">
                    <Choice form label="Token ids" name="token_source" get=|f| &f.token_source set=|f, v| f.token_source = v
                        options=&[("auto", "the server's own when every sample has them"), ("captured", "the server's own only"), ("retokenize", "re-tokenized with the template")]/>
                    <Choice form label="Conversations with several assistant turns" name="turn_rows" get=|f| &f.turn_rows set=|f, v| f.turn_rows = v
                        options=&[("per_conversation", "one row per conversation"), ("per_turn", "one row per assistant turn")]/>
                    <Choice form label="Rows from the server's ids end" name="turn_end" get=|f| &f.turn_end set=|f, v| f.turn_end = v
                        options=&[("as_sampled", "at the end token it sampled"), ("as_rendered", "as the template renders the turn (as trainers do)")]/>
                </div>
            </Show>
            <div class="row">
                <Choice form label="Destination" name="destination" get=|f| &f.destination set=|f, v| f.destination = v
                    options=&[("directory", "a folder on the server"), ("s3", "an S3 bucket")]/>
                <Show when=is(|f| &f.destination, "s3")
                    fallback=move || view! {
                        <Field form label="Folder" name="folder" get=|f| &f.folder set=|f, v| f.folder = v hint="sets"/>
                    }>
                    <Field form label="Bucket" name="bucket" get=|f| &f.bucket set=|f, v| f.bucket = v hint="training-data"/>
                    <Field form label="Key prefix" name="prefix" get=|f| &f.prefix set=|f, v| f.prefix = v hint="eagle3/qwen3"/>
                </Show>
            </div>
            <p class="muted small">
                {format!("Folders are under the storage roots ({roots}); a relative folder goes under the first. ")}
                "Each export lands in its own export-<id> folder, written under a temporary name and made visible only when complete."
            </p>
            <Show when=move || !problems.get().is_empty()>
                <ul class="error problems" role="alert" data-testid="export-problems">
                    {move || problems.get().into_iter().map(|p| view! { <li>{p}</li> }).collect_view()}
                </ul>
            </Show>
            <div class="inline-form">
                <button type="button" on:click=on_preview disabled=busy data-testid="preview-export">"Preview"</button>
                <label class="grow">"Preset name"
                    <input name="preset_name" placeholder="approved qwen3 sharegpt" autocomplete="off"
                        prop:value=move || preset_name.get() on:input=move |ev| preset_name.set(event_target_value(&ev))/>
                </label>
                <button type="button" on:click=on_save disabled=busy data-testid="save-preset">"Save as preset"</button>
                <button type="submit" class="primary" disabled=busy data-testid="export-now">"Export now"</button>
            </div>
            {answer}
            {move || preview.pending().get().then(|| view! { <p class="muted">"Counting the samples this export takes…"</p> })}
            {move || match preview.value().get() {
                Some(Ok(p)) => view! { <PreviewFigures p stale=Signal::derive(stale)/> }.into_any(),
                _ => ().into_any(),
            }}
        </form>
    }
}

#[component]
fn PreviewFigures(p: ExportPreview, stale: Signal<bool>) -> impl IntoView {
    let n = |v: u64| thousands(v as i64);
    let pairs = |list: &[(String, u64)]| {
        list.iter().map(|(k, v)| format!("{k} {}", n(*v))).collect::<Vec<_>>().join(" · ")
    };
    let kpi = |label: &'static str, value: String, testid: &'static str| {
        view! {
            <div class="kpi"><span class="value" data-testid=testid>{value}</span><span class="label">{label}</span></div>
        }
    };
    view! {
        <div class="export-preview" data-testid="export-preview">
            <Show when=move || stale.get()>
                <p class="muted small">"The form changed since this preview; press Preview again to count anew."</p>
            </Show>
            <div class="kpis">
                {kpi("samples exported", n(p.selected), "preview-selected")}
                {kpi("matched the filters", n(p.matched), "preview-matched")}
                {kpi("rejected, left out", n(p.rejected_removed), "preview-rejected")}
                {kpi("flagged, left out", n(p.flagged_removed), "preview-flagged")}
                {kpi("unreviewed, left out", n(p.unreviewed_removed), "preview-unreviewed")}
                {kpi("duplicates removed", n(p.duplicates_removed), "preview-duplicates")}
                {(p.acceptance_removed > 0).then(|| kpi("left out: stronger or unmeasured", n(p.acceptance_removed), "preview-acceptance-removed"))}
                {kpi("left out for the mix", n(p.mix_removed), "preview-mix")}
                {kpi("train / validation", format!("{} / {}", n(p.train), n(p.validation)), "preview-split")}
                // A sample sent with the server's default thinking mode is neither: say so
                // rather than show 0 / 0 for a run that reasoned throughout.
                {kpi(
                    "thinking / not / server's default",
                    format!(
                        "{} / {} / {}",
                        n(p.thinking),
                        n(p.non_thinking),
                        n(p.selected.saturating_sub(p.thinking + p.non_thinking))
                    ),
                    "preview-thinking",
                )}
                {kpi("prompt tokens", n(p.prompt_tokens), "preview-prompt-tokens")}
                {kpi("completion tokens", n(p.completion_tokens), "preview-completion-tokens")}
                {kpi("of which reasoning", n(p.reasoning_tokens), "preview-reasoning-tokens")}
            </div>
            <p class="small muted">
                {format!("By outcome: {}. By review state: {}.", pairs(&p.by_outcome), pairs(&p.by_review_state))}
                {(p.selected > 0).then(|| format!(" Mean completion: {} tokens.", n(p.completion_tokens / p.selected)))}
            </p>
            {p.acceptance.as_ref().map(|pooled| {
                let by_category = p.acceptance_by_category.iter()
                    .map(|(c, a)| format!("{c} {:.2}", a.length))
                    .collect::<Vec<_>>()
                    .join(" · ");
                view! {
                    <p class="small muted" data-testid="preview-acceptance">
                        {format!(
                            "Draft acceptance on the {} measured samples: {} (pooled by verify steps). By category: {by_category}.",
                            n(pooled.samples),
                            crate::acceptance::format_pooled(pooled),
                        )}
                    </p>
                }
            })}
            {(p.selected == 0).then(|| view! {
                <p class="error">"No sample matches: widen the outcomes, review states, categories or token range."</p>
            })}
        </div>
    }
}
