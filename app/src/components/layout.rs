use crate::auth::{current_viewer, hard_navigate, Logout};
use domain::{access::SECTIONS, Viewer};
use leptos::prelude::*;
use leptos_router::{
    components::{Outlet, Redirect, A},
    hooks::use_location,
};

/// The signed-in frame around every page but the login page: navigation filtered by role, the
/// signed-in user, and sign-out. Anonymous visitors are sent to the login page (the server
/// already redirects them; this covers client-side navigation after a session ends).
#[component]
pub fn Layout() -> impl IntoView {
    let viewer = Resource::new(|| (), |_| current_viewer());
    view! {
        <Suspense fallback=|| view! { <div class="boot">"Loading…"</div> }>
            {move || Suspend::new(async move {
                match viewer.await {
                    Ok(Some(viewer)) => view! { <SignedIn viewer/> }.into_any(),
                    Ok(None) | Err(_) => {
                        let location = use_location();
                        let next = format!("{}{}", location.pathname.get_untracked(), location.search.get_untracked());
                        let query = if next == "/" { String::new() } else { format!("?next={}", encode(&next)) };
                        view! { <Redirect path=format!("/login{query}")/> }.into_any()
                    }
                }
            })}
        </Suspense>
    }
}

#[component]
fn SignedIn(viewer: Viewer) -> impl IntoView {
    provide_context(viewer.clone());
    let logout = ServerAction::<Logout>::new();
    Effect::new(move |_| {
        if logout.value().get().is_some() {
            hard_navigate("/login");
        }
    });
    let links = SECTIONS
        .iter()
        .filter(|(_, _, role)| viewer.role.allows(*role))
        .map(|(href, label, _)| view! { <A href=*href>{*label}</A> })
        .collect_view();
    view! {
        <header class="topbar">
            <a class="brand" href="/">"Draft Studio"</a>
            <nav aria-label="Sections">{links}</nav>
            <div class="who" data-testid="signed-in-user">
                <span class="user">{viewer.username.clone()}</span>
                <span class="badge">{viewer.role.as_str()}</span>
                <ActionForm action=logout>
                    <button class="link" type="submit">"Sign out"</button>
                </ActionForm>
            </div>
        </header>
        <main class="page">
            <Outlet/>
        </main>
    }
}

/// Percent-encodes a path for use as a query value.
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
