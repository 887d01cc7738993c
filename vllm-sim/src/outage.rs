//! Outage shapes other than a dead process (for that, `server.rs` closes the port): an engine
//! restarting behind a proxy or a Kubernetes service, where every route, `/health` included,
//! answers a gateway status for a while; and an engine that fails every request while its
//! process still reports healthy.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Mutex;
use std::time::Instant;

/// The windows in force, as real-time deadlines.
#[derive(Debug, Default)]
pub(crate) struct OutageWindows {
    unavailable: Mutex<Option<(Instant, StatusCode)>>,
    failing: Mutex<Option<Instant>>,
}

impl OutageWindows {
    pub fn start_unavailable(&self, until: Instant, status: StatusCode) {
        *self.unavailable.lock().expect("never poisoned") = Some((until, status));
    }

    pub fn start_failing(&self, until: Instant) {
        *self.failing.lock().expect("never poisoned") = Some(until);
    }

    /// The status every request gets right now, while the engine is away behind its proxy.
    pub fn unavailable(&self) -> Option<StatusCode> {
        let mut window = self.unavailable.lock().expect("never poisoned");
        match *window {
            Some((until, status)) if Instant::now() < until => Some(status),
            Some(_) => {
                *window = None;
                None
            }
            None => None,
        }
    }

    /// Whether the engine fails every request right now.
    pub fn failing(&self) -> bool {
        let mut window = self.failing.lock().expect("never poisoned");
        match *window {
            Some(until) if Instant::now() < until => true,
            Some(_) => {
                *window = None;
                false
            }
            None => false,
        }
    }
}

/// What a proxy answers while its upstream is away: nginx's pages for 502 and 504, Envoy's
/// (Kubernetes ingress, Istio) text for 503.
pub(crate) fn proxy_response(status: StatusCode) -> Response {
    let nginx = |title: &str| {
        format!(
            "<html>\r\n<head><title>{title}</title></head>\r\n<body>\r\n<center><h1>{title}</h1></center>\r\n\
             <hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        )
    };
    let (content_type, body) = match status.as_u16() {
        502 => ("text/html", nginx("502 Bad Gateway")),
        504 => ("text/html", nginx("504 Gateway Time-out")),
        503 => ("text/plain", "no healthy upstream".to_string()),
        _ => ("text/plain", status.canonical_reason().unwrap_or("server error").to_string()),
    };
    (status, [(header::CONTENT_TYPE, content_type)], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn windows_close_by_themselves() {
        let windows = OutageWindows::default();
        assert_eq!(windows.unavailable(), None);
        windows.start_unavailable(Instant::now() + Duration::from_secs(60), StatusCode::BAD_GATEWAY);
        assert_eq!(windows.unavailable(), Some(StatusCode::BAD_GATEWAY));
        windows.start_unavailable(Instant::now(), StatusCode::BAD_GATEWAY);
        assert_eq!(windows.unavailable(), None);
        windows.start_failing(Instant::now() + Duration::from_secs(60));
        assert!(windows.failing());
        windows.start_failing(Instant::now());
        assert!(!windows.failing());
    }
}
