//! Form inputs bound to one `String` field of a form held in a signal. The run form and the
//! export form both keep every field as typed text (the server parses and checks it), so one
//! pair of components serves both.

use leptos::prelude::*;

/// Reads one field of the form.
pub type GetField<F> = fn(&F) -> &String;
/// Writes one field of the form.
pub type SetField<F> = fn(&mut F, String);

/// A labelled text or number input bound to one field of the form.
#[component]
pub fn Field<F: Send + Sync + 'static>(
    form: RwSignal<F>,
    label: &'static str,
    name: &'static str,
    get: GetField<F>,
    set: SetField<F>,
    #[prop(optional)] hint: &'static str,
    #[prop(default = "text")] kind: &'static str,
) -> impl IntoView {
    view! {
        <label>
            {label}
            <input type=kind name=name step="any" placeholder=hint
                prop:value=move || form.with(|f| get(f).clone())
                on:input=move |ev| form.update(|f| set(f, event_target_value(&ev)))/>
        </label>
    }
}

/// A select bound to one field of the form, with (value, label) options.
#[component]
pub fn Choice<F: Send + Sync + 'static>(
    form: RwSignal<F>,
    label: &'static str,
    name: &'static str,
    get: GetField<F>,
    set: SetField<F>,
    options: &'static [(&'static str, &'static str)],
) -> impl IntoView {
    view! {
        <label>
            {label}
            <select name=name on:change=move |ev| form.update(|f| set(f, event_target_value(&ev)))>
                {options.iter().map(|(value, text)| view! {
                    <option value=*value selected=move || form.with(|f| get(f) == value)>{*text}</option>
                }).collect_view()}
            </select>
        </label>
    }
}
