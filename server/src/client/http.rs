use super::exit;
use reqwest::{Method, StatusCode};
use serde::{de::DeserializeOwned, Serialize};
use std::time::Duration;

/// A failure of one API call, with the exit code it stands for.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ClientError {
    pub code: u8,
    pub message: String,
}

impl ClientError {
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    fn from_status(status: StatusCode, message: String) -> Self {
        let code = match status.as_u16() {
            401 | 403 => exit::UNAUTHORIZED,
            400..=499 => exit::BAD_INPUT,
            _ => exit::UNAVAILABLE,
        };
        Self::new(code, format!("{message} (HTTP {})", status.as_u16()))
    }
}

/// `/api/v1` at `base` with a bearer token.
#[derive(Clone)]
pub struct ApiClient {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl ApiClient {
    pub fn new(base: &str, token: &str) -> Result<Self, ClientError> {
        let base = base.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::new(
                exit::BAD_INPUT,
                format!("--url must be the app's address like http://studio:3000, not `{base}`"),
            ));
        }
        if token.trim().is_empty() {
            return Err(ClientError::new(
                exit::UNAUTHORIZED,
                "pass --token or set DS_TOKEN; create a token on the app's Tokens page (/tokens)",
            ));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ClientError::new(exit::ERROR, format!("cannot build an HTTP client: {e}")))?;
        Ok(Self { http, base, token: token.trim().to_string() })
    }

    fn url(&self, path: &str) -> String {
        format!("{}/api/v1{path}", self.base)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<reqwest::Response, ClientError> {
        let mut request = self.http.request(method, self.url(path)).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request
            .send()
            .await
            .map_err(|e| ClientError::new(exit::UNAVAILABLE, format!("cannot reach {}: {e}", self.base)))?;
        if response.status().is_success() {
            return Ok(response);
        }
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v["error"]["message"].as_str().map(str::to_string))
            .unwrap_or_else(|| if text.is_empty() { status.to_string() } else { text });
        Err(ClientError::from_status(status, message))
    }

    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ClientError> {
        decode(self.send(Method::GET, path, None).await?).await
    }

    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_value(body).map_err(|e| ClientError::new(exit::ERROR, e.to_string()))?;
        decode(self.send(Method::POST, path, Some(&body)).await?).await
    }

    /// The raw response of a GET, for downloads.
    pub async fn get_raw(&self, path: &str) -> Result<reqwest::Response, ClientError> {
        self.send(Method::GET, path, None).await
    }
}

async fn decode<T: DeserializeOwned>(response: reqwest::Response) -> Result<T, ClientError> {
    response
        .json()
        .await
        .map_err(|e| ClientError::new(exit::UNAVAILABLE, format!("the server's answer cannot be read: {e}")))
}
