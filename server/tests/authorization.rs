//! Walks every page route and every server function for every role, and anonymously.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::http::{Method, StatusCode};
use domain::{api_access, page_access, PageAccess, Role};
use support::{location, TestApp};

/// Every page path the app routes, with path parameters filled in.
fn page_paths() -> Vec<String> {
    let mut paths: Vec<String> = leptos_axum::generate_route_list(app::App)
        .iter()
        .map(|route| {
            route
                .path()
                .split('/')
                .map(
                    |segment| {
                        if segment.starts_with('{') || segment.starts_with(':') {
                            "1"
                        } else {
                            segment
                        }
                    },
                )
                .collect::<Vec<_>>()
                .join("/")
        })
        .map(|p| if p.is_empty() { "/".to_string() } else { p })
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// The Exports page's server functions; the walk below must reach every one of them.
const EXPORT_FUNCTIONS: &[&str] = &[
    "list",
    "choices",
    "presets",
    "save_preset",
    "delete_preset",
    "preview",
    "start",
    "start_preset",
    "cancel",
];

fn server_fn_paths() -> Vec<(String, Method)> {
    leptos::server_fn::axum::server_fn_paths().map(|(p, m)| (p.to_string(), m)).collect()
}

async fn app_with_every_role(pool: sqlx::PgPool) -> (TestApp, Vec<(Option<Role>, Option<String>)>) {
    let app = TestApp::new(pool).await;
    let mut callers = vec![(None, None)];
    for role in Role::ALL {
        app.add_user(role.as_str(), role).await;
        callers.push((Some(role), Some(app.login(role.as_str()).await)));
    }
    (app, callers)
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn every_page_is_guarded_by_its_role(pool: sqlx::PgPool) {
    let (app, callers) = app_with_every_role(pool).await;
    let paths = page_paths();
    assert!(paths.len() >= 8, "expected the app's pages, got {paths:?}");
    for path in &paths {
        for (role, cookie) in &callers {
            let response = app.get(path, cookie.as_deref()).await;
            let status = response.status();
            match (page_access(path), role) {
                (PageAccess::Public, _) => assert_eq!(status, StatusCode::OK, "{path} as {role:?}"),
                (PageAccess::Requires(_), None) => {
                    assert_eq!(status, StatusCode::SEE_OTHER, "{path} anonymously");
                    assert!(location(&response).unwrap().starts_with("/login"), "{path}");
                }
                (PageAccess::Requires(needed), Some(role)) if role.allows(needed) => assert!(
                    status.is_success() || status == StatusCode::NOT_FOUND,
                    "{path} as {role:?}: {status}"
                ),
                (PageAccess::Requires(_), Some(role)) => {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{path} as {role:?}");
                    let body = support::body_text(response).await;
                    assert!(
                        body.contains("data-testid=\"forbidden\""),
                        "{path} as {role:?} shows the 403 page"
                    );
                }
            }
        }
    }
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn every_server_function_is_guarded_by_its_namespace(pool: sqlx::PgPool) {
    let (app, callers) = app_with_every_role(pool).await;
    let functions = server_fn_paths();
    assert!(functions.len() >= 7, "expected the app's server functions, got {functions:?}");
    for name in EXPORT_FUNCTIONS {
        let path = format!("/api/exports/{name}");
        assert!(functions.iter().any(|(p, _)| *p == path), "{path} is not registered: {functions:?}");
    }
    for (path, method) in &functions {
        let access = api_access(path).unwrap_or_else(|| {
            panic!("{path} is in no namespace of domain::access::API_NAMESPACES: declare who may call it")
        });
        for (role, cookie) in &callers {
            if path == "/api/auth/logout" {
                continue; // ends the session other iterations still use; covered in accounts.rs
            }
            let response = app.send(method.clone(), path, cookie.as_deref(), Some(String::new())).await;
            let status = response.status();
            match (access, role) {
                (PageAccess::Public, _) => {
                    assert!(
                        status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                        "{path} as {role:?}: {status}"
                    )
                }
                (PageAccess::Requires(_), None) => {
                    assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} anonymously")
                }
                (PageAccess::Requires(needed), Some(role)) if role.allows(needed) => assert!(
                    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                    "{path} as {role:?}: {status}"
                ),
                (PageAccess::Requires(_), Some(role)) => {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{path} as {role:?}")
                }
            }
        }
    }
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn an_undeclared_api_namespace_is_refused(pool: sqlx::PgPool) {
    let (app, callers) = app_with_every_role(pool).await;
    let admin = callers.last().unwrap().1.clone();
    let response = app.post("/api/secret/thing", admin.as_deref(), "").await;
    assert_eq!(response.status(), StatusCode::FORBIDDEN);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn server_functions_check_the_role_themselves_too(pool: sqlx::PgPool) {
    // Bypass the router's namespace guard: call the admin-only function's body with a
    // reviewer's context, as a route added without the guard would.
    use leptos::{prelude::*, reactive::computed::ScopedFuture};
    let app = TestApp::new(pool.clone()).await;
    let rita = app.add_user("rita", Role::Reviewer).await;
    let viewer = engine::auth::find_viewer(&pool, rita).await.unwrap().unwrap();
    let owner = Owner::new();
    let result = owner
        .with(|| {
            let (mut parts, _) = axum::http::Request::new(()).into_parts();
            parts.extensions.insert(viewer);
            provide_context(parts);
            provide_context(engine::Services::new(pool.clone()));
            ScopedFuture::new(app::users::list_users())
        })
        .await;
    assert_eq!(result, Err(app::AppError::Forbidden));
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn review_bulk_actions_need_an_engineer_inside_the_reviewer_namespace(pool: sqlx::PgPool) {
    // `review/` admits reviewers; its bulk functions must refuse them on their own.
    use domain::review::{Decision, SampleFilter};
    use leptos::{prelude::*, reactive::computed::ScopedFuture};
    let app = TestApp::new(pool.clone()).await;
    let rita = app.add_user("rita", Role::Reviewer).await;
    let eve = app.add_user("eve", Role::Engineer).await;
    for (user, allowed) in [(rita, false), (eve, true)] {
        let viewer = engine::auth::find_viewer(&pool, user).await.unwrap().unwrap();
        let context = |viewer: domain::Viewer| {
            let (mut parts, _) = axum::http::Request::new(()).into_parts();
            parts.extensions.insert(viewer);
            provide_context(parts);
            provide_context(engine::Services::new(pool.clone()));
        };
        let owner = Owner::new();
        let count = owner
            .with(|| {
                context(viewer.clone());
                ScopedFuture::new(app::review::api::bulk_count(SampleFilter::default()))
            })
            .await;
        let apply = owner
            .with(|| {
                context(viewer.clone());
                ScopedFuture::new(app::review::api::bulk_apply(
                    SampleFilter::default(),
                    Decision::Reject,
                    vec![],
                    None,
                    0,
                ))
            })
            .await;
        if allowed {
            assert_eq!(count, Ok(0), "an engineer counts");
            // Nothing matches, so the confirmed count of 0 applies to nothing.
            assert_eq!(apply, Ok(0));
        } else {
            assert_eq!(count, Err(app::AppError::Forbidden));
            assert_eq!(apply, Err(app::AppError::Forbidden));
        }
    }
}

/// API routes that are not server functions, with the method they answer.
const OTHER_API_ROUTES: &[(&str, Method)] = &[
    (server::uploads::PATH, Method::POST),
    ("/api/runs/1/events", Method::GET),
    ("/api/exports/1/files/train.jsonl", Method::GET),
];

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn api_routes_outside_server_functions_are_guarded_by_their_namespace(pool: sqlx::PgPool) {
    let (app, callers) = app_with_every_role(pool).await;
    for (path, method) in OTHER_API_ROUTES {
        let access = api_access(path).unwrap_or_else(|| panic!("{path} is in no namespace"));
        for (role, cookie) in &callers {
            let status =
                app.send(method.clone(), path, cookie.as_deref(), Some(String::new())).await.status();
            match (access, role) {
                (PageAccess::Public, _) => {}
                (PageAccess::Requires(_), None) => {
                    assert_eq!(status, StatusCode::UNAUTHORIZED, "{path} anonymously")
                }
                (PageAccess::Requires(needed), Some(role)) if role.allows(needed) => assert!(
                    status != StatusCode::UNAUTHORIZED && status != StatusCode::FORBIDDEN,
                    "{path} as {role:?}: {status}"
                ),
                (PageAccess::Requires(_), Some(role)) => {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{path} as {role:?}")
                }
            }
        }
    }
}
