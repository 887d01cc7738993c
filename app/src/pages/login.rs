use crate::auth::{hard_navigate, safe_next, Login};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

#[component]
pub fn LoginPage() -> impl IntoView {
    let login = ServerAction::<Login>::new();
    let next = move || safe_next(use_query_map().read().get("next"));
    Effect::new(move |_| {
        if let Some(Ok(_)) = login.value().get() {
            hard_navigate(&next());
        }
    });
    let error = move || login.value().get().and_then(|r| r.err()).map(|e| e.to_string());
    view! {
        <Title text="Sign in"/>
        <main class="login">
            <div class="login-card">
                <h1 class="brand">"Draft Studio"</h1>
                <p class="muted">"Training data for speculative decoding"</p>
                <ActionForm action=login attr:class="stack" attr:data-testid="login-form">
                    <label>
                        "Username"
                        <input name="username" autocomplete="username" required autofocus/>
                    </label>
                    <label>
                        "Password"
                        <input
                            name="password"
                            type="password"
                            autocomplete="current-password"
                            required
                        />
                    </label>
                    <button class="primary" type="submit" disabled=move || login.pending().get()>
                        {move || if login.pending().get() { "Signing in…" } else { "Sign in" }}
                    </button>
                    <Show when=move || error().is_some()>
                        <p class="error" role="alert">{error}</p>
                    </Show>
                </ActionForm>
            </div>
        </main>
    }
}
