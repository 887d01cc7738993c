//! The page: shares the form and the server actions between its sections, and refreshes the
//! past exports every 2 s while one of them runs.

use super::api::{
    list_exports, list_presets, CancelExport, DeletePreset, SavePreset, StartExport, StartPreset,
};
use super::{builder::Builder, form::ExportForm, history::History, presets::Presets};
use crate::components::interval::every;
use domain::export::ExportStatus;
use leptos::prelude::*;
use leptos_meta::Title;
use std::time::Duration;

#[component]
pub fn ExportsPage() -> impl IntoView {
    let form = RwSignal::new(ExportForm::default());
    let start_preset = ServerAction::<StartPreset>::new();
    let start = ServerAction::<StartExport>::new();
    let cancel = ServerAction::<CancelExport>::new();
    let save = ServerAction::<SavePreset>::new();
    let delete = ServerAction::<DeletePreset>::new();

    let tick = RwSignal::new(0u32);
    let exports = Resource::new(
        move || (tick.get(), start_preset.version().get(), start.version().get(), cancel.version().get()),
        |_| list_exports(),
    );
    let presets = Resource::new(move || (save.version().get(), delete.version().get()), |_| list_presets());
    let running = Memo::new(move |_| {
        exports
            .get()
            .is_some_and(|r| matches!(r, Ok(list) if list.iter().any(|e| matches!(e.status, ExportStatus::Running | ExportStatus::Queued))))
    });
    every(Duration::from_secs(2), move || {
        if running.get_untracked() {
            tick.update(|n| *n += 1)
        }
    });

    view! {
        <Title text="Exports"/>
        <div class="page-head">
            <h1>"Exports"</h1>
        </div>
        <Presets presets form start_preset delete/>
        <Builder form start save/>
        <History exports cancel/>
    }
}
