use leptos::prelude::*;
use leptos_meta::Title;

#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(options) = use_context::<leptos_axum::ResponseOptions>() {
        options.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Not found"/>
        <section class="notice" data-testid="not-found">
            <h1>"404 · Nothing here"</h1>
            <p>"The page you asked for does not exist, or was removed."</p>
            <a href="/">"Back to the overview"</a>
        </section>
    }
}
