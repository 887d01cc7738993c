use domain::{Role, Viewer};
use leptos::prelude::*;
use leptos_meta::Title;

/// Renders its children only for a user whose role allows `role`, and a 403 page otherwise.
/// The server refuses the page request itself with 403 as well; this keeps the browser's
/// rendering identical to the server's.
#[component]
pub fn Guard(role: Role, children: ChildrenFn) -> impl IntoView {
    let allowed = use_context::<Viewer>().is_some_and(|v| v.role.allows(role));
    if allowed {
        children().into_any()
    } else {
        view! { <Forbidden needed=role/> }.into_any()
    }
}

#[component]
pub fn Forbidden(needed: Role) -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(options) = use_context::<leptos_axum::ResponseOptions>() {
        options.set_status(http::StatusCode::FORBIDDEN);
    }
    view! {
        <Title text="Not allowed"/>
        <section class="notice" data-testid="forbidden">
            <h1>"403 · Not allowed"</h1>
            <p>
                "This page needs the " <strong>{needed.as_str()}</strong>
                " role. Ask an admin to change your role if you need it."
            </p>
            <a href="/">"Back to the overview"</a>
        </section>
    }
}
