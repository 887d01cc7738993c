//! A destructive button that says what it will touch and asks once, in place.

use leptos::prelude::*;

#[component]
pub fn ConfirmButton(
    label: &'static str,
    /// What happens, e.g. "Delete preset nightly?".
    question: String,
    confirm: &'static str,
    on_confirm: impl Fn() + Copy + Send + Sync + 'static,
    #[prop(optional)] disabled: bool,
) -> impl IntoView {
    let asking = RwSignal::new(false);
    let question = StoredValue::new(question);
    view! {
        <Show
            when=move || asking.get()
            fallback=move || view! {
                <button type="button" class="danger" disabled=disabled on:click=move |_| asking.set(true)>{label}</button>
            }
        >
            <span class="confirm" role="group">
                <span>{question.get_value()}</span>
                <button type="button" class="danger" on:click=move |_| { asking.set(false); on_confirm(); }>{confirm}</button>
                <button type="button" on:click=move |_| asking.set(false)>"Keep"</button>
            </span>
        </Show>
    }
}
