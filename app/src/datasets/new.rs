//! The new-dataset form: choose a source (server file, upload, Hugging Face), look at the
//! detected schema and a preview, adjust the mapping, name it and import.

use super::api::{fetch_import_limits, ImportDataset, PreviewDataset};
use domain::dataset::{Mapping, Preview, PreviewRow, Schema, SourceSpec};
use domain::units::bytes;
use leptos::prelude::*;
use leptos_meta::Title;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Path,
    Upload,
    Hub,
}

#[component]
pub fn NewDatasetPage() -> impl IntoView {
    let kind = RwSignal::new(Kind::Upload);
    let source = RwSignal::new(None::<SourceSpec>);
    let mapping = RwSignal::new(None::<Mapping>);
    let name = RwSignal::new(String::new());
    let preview = ServerAction::<PreviewDataset>::new();
    let import = ServerAction::<ImportDataset>::new();
    let limits = Resource::new(|| (), |_| fetch_import_limits());

    let ask_preview = move |src: SourceSpec, with: Option<Mapping>| {
        source.set(Some(src.clone()));
        preview.dispatch(PreviewDataset { source: src, mapping: with });
    };
    // A fresh preview brings its mapping (detected, or the one asked for).
    Effect::new(move |_| {
        if let Some(Ok(p)) = preview.value().get() {
            mapping.set(p.mapping.clone());
        }
    });
    let navigate = leptos_router::hooks::use_navigate();
    Effect::new(move |_| {
        if let Some(Ok(id)) = import.value().get() {
            navigate(&format!("/datasets/{id}"), Default::default());
        }
    });

    let on_import = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if let Some(src) = source.get_untracked() {
            import.dispatch(ImportDataset {
                name: name.get_untracked(),
                source: src,
                mapping: mapping.get_untracked(),
            });
        }
    };
    let import_error = move || import.value().get().and_then(|r| r.err()).map(|e| e.to_string());

    view! {
        <Title text="New dataset"/>
        <h1>"New dataset"</h1>
        <section class="panel">
            <div class="ds-tabs" role="tablist">
                <TabButton kind this=Kind::Upload label="Upload a file"/>
                <TabButton kind this=Kind::Path label="File on the server"/>
                <TabButton kind this=Kind::Hub label="Hugging Face"/>
            </div>
            <Transition fallback=|| ()>
                {move || Suspend::new(async move {
                    let limits = limits.await.ok();
                    match kind.get() {
                        Kind::Upload => view! { <UploadSource name ask_preview limit=limits.as_ref().map(|l| l.upload_limit)/> }.into_any(),
                        Kind::Path => view! { <PathSource name ask_preview roots=limits.map(|l| l.roots).unwrap_or_default()/> }.into_any(),
                        Kind::Hub => view! { <HubSource name ask_preview/> }.into_any(),
                    }
                })}
            </Transition>
        </section>
        {move || preview.pending().get().then(|| view! { <p class="muted">"Reading the file…"</p> })}
        {move || match preview.value().get() {
            None => ().into_any(),
            Some(Err(e)) => view! { <p class="error" role="alert" data-testid="preview-error">{e.to_string()}</p> }.into_any(),
            Some(Ok(p)) => view! {
                <PreviewPanel p mapping on_apply=move |m| {
                    if let Some(src) = source.get_untracked() {
                        ask_preview(src, Some(m));
                    }
                }/>
                <form class="panel inline-form" on:submit=on_import data-testid="import-form">
                    <label>"Dataset name"
                        <input name="name" required maxlength="200" prop:value=move || name.get()
                            on:input=move |ev| name.set(event_target_value(&ev))/>
                    </label>
                    <button class="primary" type="submit" disabled=move || mapping.get().is_none() || import.pending().get()>
                        "Import"
                    </button>
                    {move || import_error().map(|e| view! { <p class="error" role="alert">{e}</p> })}
                </form>
            }.into_any(),
        }}
    }
}

#[component]
fn TabButton(kind: RwSignal<Kind>, this: Kind, label: &'static str) -> impl IntoView {
    view! {
        <button type="button" role="tab" class:active=move || kind.get() == this aria-selected=move || (kind.get() == this).to_string()
            on:click=move |_| kind.set(this)>{label}</button>
    }
}

/// "chat.jsonl.gz" → "chat".
fn stem(filename: &str) -> String {
    let base = filename.rsplit(['/', '\\']).next().unwrap_or(filename);
    let lower = base.to_ascii_lowercase();
    for ext in [".jsonl.gz", ".jsonl", ".json", ".parquet", ".ndjson"] {
        if lower.ends_with(ext) {
            return base[..base.len() - ext.len()].to_string();
        }
    }
    base.to_string()
}

#[component]
fn UploadSource(
    name: RwSignal<String>,
    ask_preview: impl Fn(SourceSpec, Option<Mapping>) + Copy + Send + Sync + 'static,
    limit: Option<u64>,
) -> impl IntoView {
    let input = NodeRef::<leptos::html::Input>::new();
    let progress = RwSignal::new(None::<f64>);
    let error = RwSignal::new(None::<String>);
    let on_change = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let Some(file) = input.get().and_then(|i| i.files()).and_then(|f| f.get(0)) else { return };
            error.set(None);
            progress.set(Some(0.0));
            name.set(stem(&file.name()));
            super::upload::send(
                file,
                move |f| progress.set(Some(f)),
                move |result| {
                    progress.set(None);
                    match result {
                        Ok(up) => ask_preview(
                            SourceSpec::Upload { upload_id: up.upload_id, filename: up.filename },
                            None,
                        ),
                        Err(e) => error.set(Some(e)),
                    }
                },
            );
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = (&input, ask_preview, name);
    };
    view! {
        <div class="stack">
            <label>"Dataset file (.jsonl, .jsonl.gz, .json or .parquet)"
                <input node_ref=input type="file" name="file" data-testid="upload-input"
                    accept=".jsonl,.gz,.json,.parquet,.ndjson" on:change=on_change/>
            </label>
            <p class="muted">{limit.map(|l| format!("Up to {} per file; larger files can be imported from a server folder.", bytes(l)))}</p>
            {move || progress.get().map(|f| view! {
                <div class="ds-progress" data-testid="upload-progress"><span class="bar-fill" style=format!("width: {:.1}%", f * 100.0)></span></div>
            })}
            {move || error.get().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </div>
    }
}

#[component]
fn PathSource(
    name: RwSignal<String>,
    ask_preview: impl Fn(SourceSpec, Option<Mapping>) + Copy + Send + Sync + 'static,
    roots: Vec<String>,
) -> impl IntoView {
    let path = RwSignal::new(String::new());
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let p = path.get_untracked();
        name.set(stem(&p));
        ask_preview(SourceSpec::Path { path: p }, None);
    };
    view! {
        <form class="inline-form" on:submit=on_submit>
            <label>"Path on the server"
                <input name="path" required size="60" placeholder="datasets/sharegpt.jsonl" data-testid="path-input"
                    prop:value=move || path.get() on:input=move |ev| path.set(event_target_value(&ev))/>
            </label>
            <button type="submit">"Preview"</button>
        </form>
        <p class="muted">{format!("Files must be inside: {}.", roots.join(", "))}</p>
    }
}

#[component]
fn HubSource(
    name: RwSignal<String>,
    ask_preview: impl Fn(SourceSpec, Option<Mapping>) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let repo = RwSignal::new(String::new());
    let config = RwSignal::new("default".to_string());
    let split = RwSignal::new("train".to_string());
    let token = RwSignal::new(String::new());
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let r = repo.get_untracked().trim().to_string();
        name.set(format!("{} {}", r.rsplit('/').next().unwrap_or(&r), split.get_untracked()));
        let t = token.get_untracked();
        ask_preview(
            SourceSpec::Hub {
                repo: r,
                config: config.get_untracked().trim().into(),
                split: split.get_untracked().trim().into(),
                token: Some(t).filter(|t| !t.trim().is_empty()),
            },
            None,
        );
    };
    // The repository id is the long one ("org/name"): its field takes the spare width.
    let field = |label: &'static str,
                 signal: RwSignal<String>,
                 placeholder: &'static str,
                 kind: &'static str,
                 grow: bool| {
        view! {
            <label class:grow=grow>{label}
                <input type=kind placeholder=placeholder autocomplete="off"
                    prop:value=move || signal.get() on:input=move |ev| signal.set(event_target_value(&ev))/>
            </label>
        }
    };
    view! {
        <form class="inline-form" on:submit=on_submit>
            {field("Dataset", repo, "HuggingFaceH4/ultrachat_200k", "text", true)}
            {field("Config", config, "default", "text", false)}
            {field("Split", split, "train", "text", false)}
            {field("Access token (optional)", token, "hf_…", "password", false)}
            <button type="submit">"Preview"</button>
        </form>
        <p class="muted">"The hub's Parquet files of that config and split are downloaded to the server; the token is used for the download only and never stored."</p>
    }
}

#[component]
fn PreviewPanel(
    p: Preview,
    mapping: RwSignal<Option<Mapping>>,
    on_apply: impl Fn(Mapping) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let columns = StoredValue::new(p.columns.clone());
    let detected = match &p.detected {
        Some(d) => format!("detected: {}", d.schema),
        None => "no schema detected: choose one below".to_string(),
    };
    let current = move || mapping.get().unwrap_or_else(|| Mapping::new(Schema::Prompt));
    let set_schema = move |ev: leptos::ev::Event| {
        if let Some(schema) = Schema::parse(&event_target_value(&ev)) {
            let cols = columns.get_value();
            let mut m = current();
            m.schema = schema;
            if !cols.iter().any(|c| c == schema.default_column()) {
                m.column = cols.first().cloned().unwrap_or_default();
            } else {
                m.column = schema.default_column().into();
            }
            mapping.set(Some(m));
        }
    };
    let optional = |v: String| Some(v).filter(|v| !v.is_empty());
    view! {
        <section class="panel" data-testid="preview">
            <h2>"Preview"</h2>
            <p data-testid="detected-schema">
                {format!("{} · columns: {} · {}", p.format, p.columns.join(", "), detected)}
                {p.bytes_total.map(|b| format!(" · {}", bytes(b)))}
            </p>
            <div class="inline-form">
                <label>"Schema"
                    <select on:change=set_schema data-testid="schema-select">
                        {Schema::ALL.into_iter().map(|s| view! {
                            <option value=s.as_str() selected=move || current().schema == s>{s.as_str()}</option>
                        }).collect_view()}
                    </select>
                </label>
                <ColumnSelect label="Conversation / prompt column" columns none=None
                    value=Signal::derive(move || Some(current().column))
                    on_pick=move |v| { let mut m = current(); m.column = v.unwrap_or_default(); mapping.set(Some(m)); }/>
                <ColumnSelect label="Id column" columns none=Some("(content hash)")
                    value=Signal::derive(move || current().id_column)
                    on_pick=move |v| { let mut m = current(); m.id_column = v.and_then(optional); mapping.set(Some(m)); }/>
                <ColumnSelect label="Category column" columns none=Some("(none)")
                    value=Signal::derive(move || current().category_column)
                    on_pick=move |v| { let mut m = current(); m.category_column = v.and_then(optional); mapping.set(Some(m)); }/>
                <ColumnSelect label="Tools column" columns none=Some("(none)")
                    value=Signal::derive(move || current().tools_column)
                    on_pick=move |v| { let mut m = current(); m.tools_column = v.and_then(optional); mapping.set(Some(m)); }/>
                <button type="button" on:click=move |_| on_apply(current())>"Update preview"</button>
            </div>
            <table class="data ds-compact">
                <thead><tr><th>"Where"</th><th>"Key"</th><th>"Category"</th><th>"Conversation"</th></tr></thead>
                <tbody>{p.sample.into_iter().map(|row| view! { <PreviewLine row/> }).collect_view()}</tbody>
            </table>
        </section>
    }
}

#[component]
fn ColumnSelect(
    label: &'static str,
    columns: StoredValue<Vec<String>>,
    none: Option<&'static str>,
    value: Signal<Option<String>>,
    on_pick: impl Fn(Option<String>) + Copy + Send + Sync + 'static,
) -> impl IntoView {
    let on_change = move |ev: leptos::ev::Event| {
        let v = event_target_value(&ev);
        on_pick(if v.is_empty() { None } else { Some(v) });
    };
    view! {
        <label>{label}
            <select on:change=on_change>
                {none.map(|text| view! { <option value="" selected=move || value.get().is_none()>{text}</option> })}
                {columns.get_value().into_iter().map(|c| {
                    let (this, shown) = (c.clone(), c.clone());
                    view! { <option value=c selected=move || value.get().as_deref() == Some(this.as_str())>{shown}</option> }
                }).collect_view()}
            </select>
        </label>
    }
}

#[component]
fn PreviewLine(row: PreviewRow) -> impl IntoView {
    let body = match row.result {
        Ok(messages) => messages
            .into_iter()
            .map(|m| {
                let text: String = m.content.chars().take(160).collect();
                view! { <div><span class="badge">{m.role}</span>" "{text}</div> }
            })
            .collect_view()
            .into_any(),
        Err(reason) => view! { <span class="error">{format!("refused: {reason}")}</span> }.into_any(),
    };
    view! {
        <tr>
            <td class="mono">{row.location}</td>
            <td class="mono">{row.row_key.unwrap_or_default()}</td>
            <td>{row.category.unwrap_or_default()}</td>
            <td>{body}</td>
        </tr>
    }
}
