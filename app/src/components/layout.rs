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
    // The server knows who is signed in before it renders (the request carries the viewer), and
    // hands that to the browser inside the page. Loading it with a resource read in a <Suspense>
    // around the whole page made Leptos build the page again each time it walked the Suspense
    // until it settled: every page's own data was loaded three times per request.
    // `None` only when this frame is first built in the browser after the page loaded (a link
    // from the not-found page): then the viewer is asked for.
    match SharedValue::new(viewer_on_server).into_inner() {
        Some(viewer) => signed_in_or_login(viewer),
        None => {
            let viewer = Resource::new(|| (), |_| current_viewer());
            view! {
                <Suspense fallback=|| view! { <div class="boot">"Loading…"</div> }>
                    {move || Suspend::new(async move { signed_in_or_login(viewer.await.ok().flatten()) })}
                </Suspense>
            }
            .into_any()
        }
    }
}

/// Who is signed in, as the server rendering the page knows it; `None` in the browser.
fn viewer_on_server() -> Option<Option<Viewer>> {
    #[cfg(feature = "ssr")]
    {
        Some(crate::ssr::viewer())
    }
    #[cfg(not(feature = "ssr"))]
    {
        None
    }
}

/// The frame for a signed-in viewer, or the way to the login page and back.
fn signed_in_or_login(viewer: Option<Viewer>) -> AnyView {
    match viewer {
        Some(viewer) => view! { <SignedIn viewer/> }.into_any(),
        None => {
            let location = use_location();
            let next = format!("{}{}", location.pathname.get_untracked(), location.search.get_untracked());
            let query = if next == "/" { String::new() } else { format!("?next={}", encode(&next)) };
            view! { <Redirect path=format!("/login{query}")/> }.into_any()
        }
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
pub(crate) fn encode(value: &str) -> String {
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
