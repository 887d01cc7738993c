//! Saved presets, each exported in one click, loaded into the form to change it, or deleted.

use super::api::{DeletePreset, PresetItem, StartPreset};
use super::{confirm::ConfirmButton, form::ExportForm};
use crate::components::time::RelativeTime;
use crate::AppError;
use leptos::prelude::*;

#[component]
pub fn Presets(
    presets: Resource<Result<Vec<PresetItem>, AppError>>,
    form: RwSignal<ExportForm>,
    start_preset: ServerAction<StartPreset>,
    delete: ServerAction<DeletePreset>,
) -> impl IntoView {
    let started = move || match start_preset.value().get() {
        Some(Ok(id)) => view! {
            <p class="ok-note" role="status" data-testid="preset-started">
                {format!("Export {id} started; follow it under Past exports below.")}
            </p>
        }
        .into_any(),
        Some(Err(e)) => {
            view! { <p class="error" role="alert" data-testid="preset-error">{e.to_string()}</p> }.into_any()
        }
        None => ().into_any(),
    };
    let delete_error = move || delete.value().get().and_then(|r| r.err()).map(|e| e.to_string());
    view! {
        <section class="panel" data-testid="presets">
            <h2>"Presets"</h2>
            <Transition fallback=|| view! { <p class="muted">"Loading presets…"</p> }>
                {move || Suspend::new(async move {
                    match presets.await {
                        Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                        Ok(list) if list.is_empty() => view! {
                            <p class="empty">
                                "No presets yet. Build an export below and press "
                                <strong>"Save as preset"</strong>
                                " to export it again in one click."
                            </p>
                        }.into_any(),
                        Ok(list) => view! {
                            <table class="data" data-testid="presets-table">
                                <thead>
                                    <tr><th>"Preset"</th><th>"What and where"</th><th>"Saved"</th><th class="actions"></th></tr>
                                </thead>
                                <tbody>
                                    {list.into_iter().map(|preset| view! { <PresetRow preset form start_preset delete/> }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any(),
                    }
                })}
            </Transition>
            {started}
            {move || delete_error().map(|e| view! { <p class="error" role="alert">{e}</p> })}
        </section>
    }
}

#[component]
fn PresetRow(
    preset: PresetItem,
    form: RwSignal<ExportForm>,
    start_preset: ServerAction<StartPreset>,
    delete: ServerAction<DeletePreset>,
) -> impl IntoView {
    let id = preset.id;
    let spec = StoredValue::new(preset.spec.clone());
    let load = move |_| {
        form.set(ExportForm::from_spec(&spec.get_value()));
        #[cfg(feature = "hydrate")]
        if let Some(el) = document().get_element_by_id("export-form") {
            el.scroll_into_view();
        }
    };
    view! {
        <tr data-preset=preset.name.clone()>
            <td><strong>{preset.name.clone()}</strong></td>
            <td class="muted small">{preset.spec.describe()}</td>
            <td><RelativeTime at=preset.updated_at/></td>
            <td class="actions">
                <button type="button" class="primary" data-testid="preset-export"
                    disabled=move || start_preset.pending().get()
                    on:click=move |_| { start_preset.dispatch(StartPreset { preset_id: id }); }>
                    "Export"
                </button>
                " "
                <button type="button" on:click=load title="Load this preset into the form below">"Edit"</button>
                " "
                <ConfirmButton label="Delete" confirm="Delete"
                    question=format!("Delete preset {}? Past exports and their files stay.", preset.name)
                    on_confirm=move || { delete.dispatch(DeletePreset { id }); }/>
            </td>
        </tr>
    }
}
