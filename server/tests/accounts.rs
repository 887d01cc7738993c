//! Signing in and out, sessions, rate limits and account changes, through the router.
#![allow(clippy::unwrap_used)] // Tests may unwrap: a failure there is a failure of the test, with its message.

mod support;

use axum::http::StatusCode;
use domain::Role;
use support::{body_text, location, session_cookie, set_cookie, TestApp};

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn login_sets_an_http_only_same_site_cookie_and_reports_the_user(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("ada", Role::Engineer).await;
    let response = app.login_with("Ada", support::PASSWORD).await;
    assert_eq!(response.status(), StatusCode::OK);
    let cookie = set_cookie(&response).unwrap();
    assert!(cookie.contains("HttpOnly"), "{cookie}");
    assert!(cookie.contains("SameSite=Lax"), "{cookie}");
    assert!(!cookie.contains("Secure"), "plain http must not set Secure: {cookie}");
    let body = body_text(response).await;
    assert!(body.contains("\"role\":\"engineer\""), "{body}");
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn cookies_are_secure_when_served_over_https(pool: sqlx::PgPool) {
    let app = TestApp::with_env(pool, &[("DS_PUBLIC_URL", "https://studio.example")]).await;
    app.add_user("ada", Role::Engineer).await;
    let response = app.login_with("ada", support::PASSWORD).await;
    assert!(set_cookie(&response).unwrap().contains("Secure"));
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_wrong_password_is_refused_without_a_session(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("ada", Role::Engineer).await;
    let response = app.login_with("ada", "not-the-password").await;
    assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(session_cookie(&response).is_none());
    assert!(body_text(response).await.contains("wrong username or password"));
    let unknown = app.login_with("nobody", "whatever-password").await;
    assert_eq!(unknown.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn repeated_failures_are_rate_limited_per_account(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("ada", Role::Engineer).await;
    app.add_user("bob", Role::Engineer).await;
    for _ in 0..5 {
        assert_eq!(
            app.login_with("ada", "guess-guess-guess").await.status(),
            StatusCode::UNPROCESSABLE_ENTITY
        );
    }
    let limited = app.login_with("ada", support::PASSWORD).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(body_text(limited).await.contains("try again in"));
    // Another account from the same address is not locked by ada's failures.
    assert_eq!(app.login_with("bob", support::PASSWORD).await.status(), StatusCode::OK);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn a_session_survives_a_restart(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("ada", Role::Engineer).await;
    let cookie = app.login("ada").await;
    let restarted = app.restarted().await;
    let response = restarted.get("/runs", Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert!(body_text(response).await.contains("ada"));
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn logout_ends_the_session(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("ada", Role::Engineer).await;
    let cookie = app.login("ada").await;
    assert_eq!(app.post("/api/auth/logout", Some(&cookie), "").await.status(), StatusCode::OK);
    let response = app.get("/runs", Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&response), Some("/login?next=%2Fruns"));
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn disabling_a_user_ends_their_sessions_and_blocks_sign_in(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("root", Role::Admin).await;
    let victim = app.add_user("eve", Role::Engineer).await;
    let admin = app.login("root").await;
    let eve = app.login("eve").await;
    let response =
        app.post("/api/users/set_disabled", Some(&admin), &format!("id={victim}&disabled=true")).await;
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(app.get("/runs", Some(&eve)).await.status(), StatusCode::SEE_OTHER);
    assert_eq!(app.login_with("eve", support::PASSWORD).await.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn the_last_admin_cannot_be_demoted_or_disabled(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    let root = app.add_user("root", Role::Admin).await;
    let other = app.add_user("amy", Role::Admin).await;
    let cookie = app.login("root").await;
    // Demoting one of two admins is fine...
    let ok = app.post("/api/users/set_role", Some(&cookie), &format!("id={other}&role=engineer")).await;
    assert_eq!(ok.status(), StatusCode::OK);
    // ...the last one is refused with a reason, and nothing changes.
    let refused = app.post("/api/users/set_role", Some(&cookie), &format!("id={root}&role=reviewer")).await;
    assert_eq!(refused.status(), StatusCode::CONFLICT);
    assert!(body_text(refused).await.contains("no enabled admin"));
    let self_disable =
        app.post("/api/users/set_disabled", Some(&cookie), &format!("id={root}&disabled=true")).await;
    assert_eq!(self_disable.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let role: String = sqlx::query_scalar("SELECT role::text FROM users WHERE id = $1")
        .bind(root)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(role, "admin");
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn creating_a_user_validates_and_refuses_duplicates(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("root", Role::Admin).await;
    let cookie = app.login("root").await;
    let created = app
        .post("/api/users/create", Some(&cookie), "username=Rita&password=long-enough-pw&role=reviewer")
        .await;
    assert_eq!(created.status(), StatusCode::OK);
    assert!(body_text(created).await.contains("\"username\":\"rita\""));
    let duplicate = app
        .post("/api/users/create", Some(&cookie), "username=rita&password=long-enough-pw&role=reviewer")
        .await;
    assert_eq!(duplicate.status(), StatusCode::CONFLICT);
    assert!(body_text(duplicate).await.contains("`rita` is taken"));
    let short =
        app.post("/api/users/create", Some(&cookie), "username=sam&password=short&role=reviewer").await;
    assert_eq!(short.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert!(body_text(short).await.contains("at least 10 characters"));
}

#[sqlx::test(migrator = "engine::MIGRATOR")]
async fn unknown_pages_are_404_for_signed_in_users(pool: sqlx::PgPool) {
    let app = TestApp::new(pool).await;
    app.add_user("ada", Role::Reviewer).await;
    let cookie = app.login("ada").await;
    let response = app.get("/no/such/page", Some(&cookie)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert!(body_text(response).await.contains("data-testid=\"not-found\""));
}
