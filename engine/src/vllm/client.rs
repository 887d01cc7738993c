use super::{
    chat::{read_stream, Completion, Failure, FailureKind, Limits, Partial, Progress},
    error_body::error_message,
    load::ServerLoad,
    wire::{ChatRequest, ModelList},
};
use reqwest::{header, StatusCode};
use std::time::{Duration, Instant};

pub use domain::ServedModel;

/// How long one chat call may take.
#[derive(Clone, Copy, Debug)]
pub struct ChatCall {
    /// Cut only when nothing arrives for this long; a long generation is never cut for length.
    pub idle_timeout: Duration,
    pub deadline: Option<Duration>,
    /// The ids of the tokens that end the reasoning and open a call (`</think>`, `<tool_call>`,
    /// as the server's `/tokenize` gives them): a streamed chunk that holds the end of one span
    /// and the start of the next is split there. Without them such a completion has no span
    /// counts.
    pub markers: super::SpanMarkers,
}

/// One vLLM server. Cheap to clone; clones share the connection pool.
#[derive(Clone, Debug)]
pub struct VllmClient {
    http: reqwest::Client,
    base: String,
    api_key: Option<String>,
}

/// The shared HTTP client. No overall timeout (streams are bounded by idle time instead); idle
/// pooled connections are dropped before vLLM's 5 s keep-alive closes them under us.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(Duration::from_secs(4))
        .pool_max_idle_per_host(1024)
        .tcp_nodelay(true)
        .user_agent(concat!("draft-studio/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("a TLS-less reqwest client always builds")
}

impl VllmClient {
    /// `base_url` is the server root (`http://host:8000`); a trailing `/v1` is accepted too.
    pub fn new(http: reqwest::Client, base_url: &str, api_key: Option<String>) -> Result<Self, String> {
        let trimmed = base_url.trim().trim_end_matches('/');
        let base = trimmed.strip_suffix("/v1").unwrap_or(trimmed).to_string();
        let parsed = url::Url::parse(&base).map_err(|e| format!("`{base_url}` is not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!("`{base_url}` must be an http:// or https:// URL with a host"));
        }
        Ok(Self { http, base, api_key: api_key.filter(|k| !k.trim().is_empty()) })
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{path}", self.base));
        match &self.api_key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    /// Streams one chat completion to its end.
    pub async fn chat(&self, request: &ChatRequest, call: ChatCall) -> Result<Completion, Failure> {
        self.chat_observed(request, call, |_| {}).await
    }

    /// Like `chat`, calling `on_progress` as the stream arrives: the time to first token (the
    /// concurrency controller needs it before long generations end) and each later chunk's
    /// tokens (the chunk size follows the pace).
    pub async fn chat_observed(
        &self,
        request: &ChatRequest,
        call: ChatCall,
        on_progress: impl FnMut(Progress),
    ) -> Result<Completion, Failure> {
        let started = Instant::now();
        let limits =
            Limits { idle: call.idle_timeout, deadline: call.deadline.map(|d| started + d), started };
        let send = self
            .request(reqwest::Method::POST, "/v1/chat/completions")
            .header(header::ACCEPT, "text/event-stream")
            .json(request)
            .send();
        let response = match limits.wait(send).await {
            Err(kind) => return Err(limits.timeout_failure(kind, Partial::default())),
            Ok(Err(e)) => {
                let kind = if e.is_connect() { FailureKind::Connect } else { FailureKind::Disconnected };
                return Err(limits.failure(kind, describe(&e), Partial::default()));
            }
            Ok(Ok(response)) => response,
        };
        let status = response.status();
        if !status.is_success() {
            let body = limits.wait(response.text()).await.ok().and_then(Result::ok).unwrap_or_default();
            let message = format!("HTTP {}: {}", status.as_u16(), error_message(&body));
            return Err(limits.failure(
                FailureKind::Http { status: status.as_u16() },
                message,
                Partial::default(),
            ));
        }
        read_stream(response, limits, call.markers, on_progress).await
    }

    /// The one token id `text` encodes to, by the model's tokenizer (`POST /tokenize`, no
    /// special tokens added); `None` when it takes several tokens or none.
    pub async fn single_token(&self, model: &str, text: &str) -> Result<Option<u32>, String> {
        #[derive(serde::Deserialize)]
        struct Tokens {
            tokens: Vec<u32>,
        }
        let body = serde_json::json!({"model": model, "prompt": text, "add_special_tokens": false});
        let response = self
            .request(reqwest::Method::POST, "/tokenize")
            .json(&body)
            .timeout(Duration::from_secs(30))
            .send()
            .await
            .map_err(|e| describe(&e))?;
        if !response.status().is_success() {
            return Err(format!("/tokenize answered HTTP {}", response.status().as_u16()));
        }
        let tokens: Tokens = response.json().await.map_err(|e| format!("/tokenize answered {e}"))?;
        Ok(match tokens.tokens.as_slice() {
            [one] => Some(*one),
            _ => None,
        })
    }

    /// `GET /v1/models`.
    pub async fn models(&self) -> Result<Vec<ServedModel>, String> {
        let response = self
            .request(reqwest::Method::GET, "/v1/models")
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .map_err(|e| describe(&e))?;
        let status = response.status();
        let body = response.text().await.map_err(|e| describe(&e))?;
        if !status.is_success() {
            return Err(format!("HTTP {} from /v1/models: {}", status.as_u16(), error_message(&body)));
        }
        let list: ModelList = serde_json::from_str(&body)
            .map_err(|e| format!("/v1/models did not answer a model list ({e}); is this a vLLM server?"))?;
        Ok(list.data.into_iter().map(|m| ServedModel { id: m.id, max_model_len: m.max_model_len }).collect())
    }

    /// `GET /version`: the server's release (vLLM answers `{"version": "0.11.0"}`); `None` for a
    /// server without the route.
    pub async fn version(&self) -> Result<Option<String>, String> {
        let response = self
            .request(reqwest::Method::GET, "/version")
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| format!("/version: {}", describe(&e)))?;
        if !response.status().is_success() {
            return Ok(None);
        }
        let body: serde_json::Value =
            response.json().await.map_err(|e| format!("/version: {}", describe(&e)))?;
        Ok(body.get("version").and_then(|v| v.as_str()).map(str::to_string))
    }

    /// `Ok` when `GET /health` answers 200 within a few seconds; else what it did instead.
    pub async fn health(&self) -> Result<(), String> {
        let response = self
            .request(reqwest::Method::GET, "/health")
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| format!("/health: {}", describe(&e)))?;
        match response.status() {
            status if status.is_success() => Ok(()),
            status => Err(format!("/health answers HTTP {}", status.as_u16())),
        }
    }

    /// One tiny request (a single token, not streamed): whether the server really generates,
    /// beyond its `/health` answering.
    pub async fn probe(&self, model: &str) -> Result<(), String> {
        let body = serde_json::json!({
            "model": model,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 1,
            "stream": false,
        });
        let response = self
            .request(reqwest::Method::POST, "/v1/chat/completions")
            .timeout(Duration::from_secs(60))
            .json(&body)
            .send()
            .await
            .map_err(|e| format!("probe request: {}", describe(&e)))?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let body = response.text().await.unwrap_or_default();
        Err(format!("probe request: HTTP {}: {}", status.as_u16(), error_message(&body)))
    }

    /// The server's load from `/metrics`; `Ok(None)` when it exposes no metrics (404).
    pub async fn load(&self) -> Result<Option<ServerLoad>, String> {
        let response = self
            .request(reqwest::Method::GET, "/metrics")
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .map_err(|e| describe(&e))?;
        match response.status() {
            StatusCode::NOT_FOUND => Ok(None),
            status if status.is_success() => {
                let text = response.text().await.map_err(|e| describe(&e))?;
                Ok(ServerLoad::parse(&text))
            }
            status => Err(format!("HTTP {} from /metrics", status.as_u16())),
        }
    }
}

/// reqwest's error with its causes, which is where the useful part ("Connection refused") is.
fn describe(error: &reqwest::Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised_and_checked() {
        let http = http_client();
        assert_eq!(
            VllmClient::new(http.clone(), "http://gpu:8000/v1/", None).unwrap().base_url(),
            "http://gpu:8000"
        );
        assert_eq!(
            VllmClient::new(http.clone(), " http://gpu:8000 ", None).unwrap().base_url(),
            "http://gpu:8000"
        );
        assert!(VllmClient::new(http.clone(), "gpu:8000", None).unwrap_err().contains("http://"));
        assert!(VllmClient::new(http, "not a url", None).is_err());
    }

    /// A stream as the real vLLM 0.32 server sends it with `return_token_ids` and a reasoning
    /// parser, whose first token is a piece of a character: its id comes at once, its text only
    /// with the next chunk, here 400 ms later.
    async fn serve_stream() -> String {
        use futures::StreamExt;
        const EVENTS: [(u64, &str); 6] = [
            (
                0,
                r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}],"prompt_token_ids":[1,339,86]}"#,
            ),
            (0, r#"{"choices":[{"index":0,"delta":{"reasoning":""},"token_ids":[106]}]}"#),
            (400, r#"{"choices":[{"index":0,"delta":{"reasoning":"é and"},"token_ids":[5,6]}]}"#),
            (
                100,
                r#"{"choices":[{"index":0,"delta":{"content":" so"},"finish_reason":"length","token_ids":[7]}]}"#,
            ),
            (0, r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#),
            (0, "[DONE]"),
        ];
        let respond = || async {
            let events = futures::stream::iter(EVENTS).then(|(wait, data)| async move {
                tokio::time::sleep(Duration::from_millis(wait)).await;
                Ok::<_, std::convert::Infallible>(format!("data: {data}\n\n"))
            });
            axum::response::Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(axum::body::Body::from_stream(events))
                .unwrap()
        };
        let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(respond));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }

    #[tokio::test]
    async fn the_first_token_is_its_id_and_the_pace_is_told_by_later_chunks() {
        let client = VllmClient::new(http_client(), &serve_stream().await, None).unwrap();
        let request = ChatRequest {
            model: "tiny".into(),
            messages: vec![crate::vllm::ChatMessage::text("user", "hi")],
            tools: None,
            tool_choice: None,
            parallel_tool_calls: None,
            max_tokens: 4,
            temperature: None,
            top_p: None,
            seed: None,
            chat_template_kwargs: None,
            stream_interval: Some(256),
            stream: true,
            stream_options: crate::vllm::StreamOptions { include_usage: true },
            return_token_ids: true,
        };
        let call =
            ChatCall { idle_timeout: Duration::from_secs(5), deadline: None, markers: Default::default() };
        let mut told = Vec::new();
        let completion = client.chat_observed(&request, call, |p| told.push(p)).await.unwrap();
        let ttft = completion.ttft.unwrap();
        assert!(
            ttft < Duration::from_millis(300),
            "the first token is timed by its id, not by its text 400 ms later: {ttft:?}"
        );
        assert_eq!(told[0], Progress::FirstToken(ttft));
        let paces: Vec<(u32, bool)> = told[1..]
            .iter()
            .map(|p| match p {
                Progress::Tokens { tokens, after } => (*tokens, *after >= Duration::from_millis(350)),
                Progress::FirstToken(_) => panic!("one first token: {told:?}"),
            })
            .collect();
        assert_eq!(paces, [(2, true), (1, false)], "{told:?}");
        assert_eq!(completion.reasoning, "é and");
        assert_eq!(completion.tokens.unwrap().completion, [106, 5, 6, 7]);
    }
}
