//! A router exactly as the binary builds it, over a per-test database, plus request helpers.
#![allow(dead_code)] // each test binary uses a different subset of the helpers

use axum::{
    body::Body,
    extract::connect_info::MockConnectInfo,
    http::{header, Method, Request, Response, StatusCode},
    Router,
};
use domain::Role;
use http_body_util::BodyExt;
use server::{config::Config, leptos_config, router, session, state::AppState};
use sqlx::PgPool;
use std::net::SocketAddr;
use tower::ServiceExt;
use tower_sessions::cookie::Key;

pub const PASSWORD: &str = "test-password-123";

pub struct TestApp {
    pub router: Router,
    pub pool: PgPool,
    pub config: Config,
}

/// One signing key for every router in a test, as one deployment keeps its key across restarts.
fn key() -> Key {
    Key::from(&[7u8; 64])
}

impl TestApp {
    pub async fn new(pool: PgPool) -> Self {
        Self::with_env(pool, &[]).await
    }

    pub async fn with_env(pool: PgPool, vars: &[(&str, &str)]) -> Self {
        let data_dir = std::env::temp_dir().join(format!("ds-test-{}", rand::random::<u64>()));
        let data_dir_str = data_dir.to_string_lossy().to_string();
        let mut all: Vec<(&str, &str)> = vec![("DS_DATA_DIR", &data_dir_str)];
        all.extend_from_slice(vars);
        let config = Config::from_lookup(|k| all.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
            .expect("test configuration");
        let services = engine::Services::new(pool.clone())
            .with_datasets(config.dataset_settings())
            .with_export_roots(config.export_roots.clone());
        let state = AppState::new(leptos_config::options(&config), services);
        let layer = session::layer(session::store(pool.clone()), key(), config.secure_cookies());
        let router =
            router::build(state, layer).layer(MockConnectInfo(SocketAddr::from(([10, 1, 2, 3], 4567))));
        Self { router, pool, config }
    }

    /// A fresh router over the same database: what a restarted server process looks like.
    pub async fn restarted(&self) -> Self {
        Self::new(self.pool.clone()).await
    }

    pub async fn add_user(&self, name: &str, role: Role) -> i64 {
        engine::auth::create_user(
            &self.pool,
            engine::auth::NewUser { username: name, password: PASSWORD, role },
        )
        .await
        .expect("create user")
        .id
    }

    /// Signs in through the real login server function; returns the session cookie.
    pub async fn login(&self, name: &str) -> String {
        let response = self.login_with(name, PASSWORD).await;
        assert_eq!(response.status(), StatusCode::OK, "login of {name} failed");
        session_cookie(&response).expect("login sets the session cookie")
    }

    pub async fn login_with(&self, name: &str, password: &str) -> Response<Body> {
        let body = format!("username={name}&password={}", password.replace(' ', "+"));
        self.send(Method::POST, "/api/auth/login", None, Some(body)).await
    }

    pub async fn get(&self, path: &str, cookie: Option<&str>) -> Response<Body> {
        self.send(Method::GET, path, cookie, None).await
    }

    pub async fn post(&self, path: &str, cookie: Option<&str>, form: &str) -> Response<Body> {
        self.send(Method::POST, path, cookie, Some(form.to_string())).await
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        cookie: Option<&str>,
        form: Option<String>,
    ) -> Response<Body> {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(cookie) = cookie {
            request = request.header(header::COOKIE, cookie);
        }
        let body = match form {
            Some(form) => {
                request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
                Body::from(form)
            }
            None => Body::empty(),
        };
        self.router.clone().oneshot(request.body(body).unwrap()).await.unwrap()
    }
}

/// `name=value` of the session cookie a response sets.
pub fn session_cookie(response: &Response<Body>) -> Option<String> {
    set_cookie(response).map(|c| c.split(';').next().unwrap().to_string())
}

pub fn set_cookie(response: &Response<Body>) -> Option<String> {
    response
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("ds_session="))
        .map(str::to_string)
}

pub async fn body_text(response: Response<Body>) -> String {
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8_lossy(&bytes).into_owned()
}

pub fn location(response: &Response<Body>) -> Option<&str> {
    response.headers().get(header::LOCATION).and_then(|v| v.to_str().ok())
}

impl TestApp {
    /// A personal API token of `user_id` (the plaintext, as shown once).
    pub async fn token(&self, user_id: i64) -> String {
        engine::auth::tokens::create(&self.pool, user_id, "test", 30).await.expect("token").token
    }

    /// One `/api/v1` call with an optional bearer token and JSON body; the status and the JSON
    /// answer (`Null` for an empty or non-JSON body).
    pub async fn api(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<serde_json::Value>,
    ) -> (StatusCode, serde_json::Value) {
        let response = self.api_raw(method, path, token, body).await;
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
    }

    /// A `POST` of raw bytes (`application/octet-stream`) with a bearer token; the status and
    /// the JSON answer.
    pub async fn api_bytes(
        &self,
        path: &str,
        token: &str,
        bytes: Vec<u8>,
    ) -> (StatusCode, serde_json::Value) {
        let request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"))
            .header(header::CONTENT_TYPE, "application/octet-stream")
            .body(Body::from(bytes))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null))
    }

    pub async fn api_raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<serde_json::Value>,
    ) -> Response<Body> {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some(json) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        self.router.clone().oneshot(request.body(body).unwrap()).await.unwrap()
    }
}
