use leptos::prelude::*;
use leptos_meta::Title;

/// A section whose feature is not built yet says so plainly, with the issue that tracks it.
#[component]
pub fn Pending(section: &'static str, issue: u32) -> impl IntoView {
    view! {
        <Title text=section/>
        <h1>{section}</h1>
        <section class="empty">
            <p>{format!("{section} are not built yet; issue #{issue} tracks them.")}</p>
        </section>
    }
}
