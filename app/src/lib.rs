//! Draft Studio's user interface: pages, components and the server functions they call.
//! Server functions stay thin: they check the caller's role and call the `engine`.

#![recursion_limit = "256"]

pub mod acceptance;
pub mod auth;
pub mod components;
pub mod datasets;
pub mod endpoints;
pub mod error;
pub mod exports;
pub mod overview;
pub mod pages;
pub mod review;
pub mod runs;
#[cfg(feature = "ssr")]
pub mod ssr;
pub mod tokens;
pub mod users;

pub use error::AppError;

use components::layout::Layout;
use domain::Role;
use leptos::prelude::*;
use leptos_meta::{provide_meta_context, MetaTags, Stylesheet, Title};
use leptos_router::{
    components::{ParentRoute, Route, Router, Routes},
    path,
};
use overview::OverviewPage;
use pages::{guard::Guard, login::LoginPage, not_found::NotFound};

pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="icon" href="/favicon.svg" type="image/svg+xml"/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    // Browser tests wait for this mark before they click: it is set only once hydration ran.
    Effect::new(|_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    view! {
        <Stylesheet id="leptos" href="/pkg/draft-studio.css"/>
        <Title formatter=|title: String| format!("{title} · Draft Studio")/>
        <Router>
            <Routes fallback=|| view! { <NotFound/> }>
                <Route path=path!("/login") view=LoginPage/>
                <ParentRoute path=path!("") view=Layout>
                    <Route path=path!("") view=OverviewPage/>
                    <Route
                        path=path!("datasets")
                        view=|| view! { <Guard role=Role::Engineer><datasets::list::DatasetsPage/></Guard> }
                    />
                    <Route
                        path=path!("datasets/new")
                        view=|| view! { <Guard role=Role::Engineer><datasets::new::NewDatasetPage/></Guard> }
                    />
                    <Route
                        path=path!("datasets/:id")
                        view=|| view! { <Guard role=Role::Engineer><datasets::detail::DatasetPage/></Guard> }
                    />
                    <Route
                        path=path!("runs")
                        view=|| view! { <Guard role=Role::Engineer><runs::RunsPage/></Guard> }
                    />
                    <Route
                        path=path!("runs/new")
                        view=|| view! { <Guard role=Role::Engineer><runs::NewRunPage/></Guard> }
                    />
                    <Route
                        path=path!("runs/:id")
                        view=|| view! { <Guard role=Role::Engineer><runs::RunPage/></Guard> }
                    />
                    <Route
                        path=path!("review")
                        view=|| view! { <Guard role=Role::Reviewer><review::list::ReviewListPage/></Guard> }
                    />
                    <Route
                        path=path!("review/queue")
                        view=|| view! { <Guard role=Role::Reviewer><review::queue::QueuePage/></Guard> }
                    />
                    <Route
                        path=path!("review/samples/:id")
                        view=|| view! { <Guard role=Role::Reviewer><review::sample::SamplePage/></Guard> }
                    />
                    <Route
                        path=path!("acceptance")
                        view=|| view! { <Guard role=Role::Engineer><acceptance::AcceptancePage/></Guard> }
                    />
                    <Route
                        path=path!("acceptance/runs/:id")
                        view=|| view! { <Guard role=Role::Engineer><acceptance::RunAcceptancePage/></Guard> }
                    />
                    <Route
                        path=path!("acceptance/compare")
                        view=|| view! { <Guard role=Role::Engineer><acceptance::ComparePage/></Guard> }
                    />
                    <Route
                        path=path!("acceptance/loop")
                        view=|| view! { <Guard role=Role::Engineer><acceptance::LoopPage/></Guard> }
                    />
                    <Route
                        path=path!("exports")
                        view=|| view! { <Guard role=Role::Engineer><exports::ExportsPage/></Guard> }
                    />
                    <Route
                        path=path!("endpoints")
                        view=|| view! { <Guard role=Role::Engineer><endpoints::EndpointsPage/></Guard> }
                    />
                    <Route
                        path=path!("tokens")
                        view=|| view! { <Guard role=Role::Reviewer><tokens::TokensPage/></Guard> }
                    />
                    <Route
                        path=path!("users")
                        view=|| view! { <Guard role=Role::Admin><users::UsersPage/></Guard> }
                    />
                </ParentRoute>
            </Routes>
        </Router>
    }
}
