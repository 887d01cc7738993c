//! The training view on a sample's page: the exported tokens with the supervised ones
//! highlighted, loaded when the reviewer opens it (decoding needs the target's tokenizer).

use super::api::load_training_view;
use domain::review::{TrainingSource, TrainingView};
use leptos::prelude::*;

#[component]
pub fn TrainingPanel(id: i64) -> impl IntoView {
    let dir = RwSignal::new(String::new());
    // Bumped by "Show"; 0 until the reviewer asks, so the page does not load a tokenizer unasked.
    let asked = RwSignal::new(0u32);
    let view = Resource::new(
        move || asked.get(),
        move |n| {
            let dir = dir.get_untracked();
            async move {
                if n == 0 {
                    return None;
                }
                Some(load_training_view(id, Some(dir).filter(|d| !d.trim().is_empty())).await)
            }
        },
    );
    view! {
        <section class="panel training" aria-label="Training view" data-testid="training-view">
            <h2>"Training view"</h2>
            <p class="muted">
                "The row the pre-tokenized export writes for this sample. Highlighted tokens are under the loss mask: the draft model learns to predict them."
            </p>
            <form class="row" on:submit=move |ev| { ev.prevent_default(); asked.update(|n| *n += 1); }>
                <label>
                    "Tokenizer folder "
                    <input name="training_tokenizer_dir" placeholder="the latest tokenized export's" prop:value=move || dir.get() on:input=move |ev| dir.set(event_target_value(&ev))/>
                </label>
                <button type="submit">"Show"</button>
            </form>
            <Transition fallback=|| view! { <p class="muted">"Decoding…"</p> }>
                {move || view.get().flatten().map(|result| match result {
                    Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
                    Ok(v) => view! { <Tokens v/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Tokens(v: TrainingView) -> impl IntoView {
    let source = match v.source {
        TrainingSource::Captured => "the server's own token ids",
        TrainingSource::Retokenized => "re-tokenized with the chat template (the server gave no ids)",
    };
    let total = v.tokens.len();
    view! {
        <p data-testid="training-summary">
            {format!("{total} tokens, {} supervised, from {source}; tokenizer {}.", v.supervised, v.tokenizer_dir)}
            {(v.unsupervised_turns > 0).then(|| format!(
                " {} earlier assistant turn(s) are left unsupervised: the template renders them differently in the history.",
                v.unsupervised_turns
            ))}
        </p>
        <pre class="tokens text">
            {v.tokens.into_iter().map(|t| {
                let class = if t.supervised { "tok sup" } else { "tok" };
                view! { <span class=class title=t.id.to_string()>{t.text}</span> }
            }).collect_view()}
        </pre>
    }
}
