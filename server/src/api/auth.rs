//! Bearer tokens on `/api/v1`: the token's owner, with the owner's current role, becomes the
//! request's caller. Session cookies are not accepted here, so a browser page cannot be made to
//! call the API on its user's behalf.

use super::error::ApiError;
use crate::state::AppState;
use axum::{
    extract::{FromRequestParts, Request, State},
    http::{header, request::Parts},
    middleware::Next,
    response::{IntoResponse, Response},
};
use domain::{Role, Viewer};

/// The authenticated caller of an API route.
#[derive(Clone, Debug)]
pub struct Caller(pub Viewer);

impl Caller {
    /// The caller when their role allows `role`, else 403 with what to do.
    pub fn require(&self, role: Role) -> Result<&Viewer, ApiError> {
        if self.0.role.allows(role) {
            Ok(&self.0)
        } else {
            Err(ApiError::new(
                axum::http::StatusCode::FORBIDDEN,
                format!(
                    "this needs the {role} role and the token belongs to {} ({}); ask an admin for the role \
                     or use a token of an account that has it",
                    self.0.username, self.0.role
                ),
            ))
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts.extensions.get::<Caller>().cloned().ok_or_else(missing)
    }
}

fn missing() -> ApiError {
    ApiError::unauthorized(
        "send an API token as `Authorization: Bearer <token>`; create one on the Tokens page (/tokens)",
    )
}

/// The token of an `Authorization: Bearer` header, if there is one.
pub fn bearer(parts: &axum::http::HeaderMap) -> Option<&str> {
    let value = parts.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Resolves the bearer token of every request under `/api/v1` (except the public document) into
/// a [`Caller`]; refuses the request with 401 when it has none or an unusable one.
pub async fn authenticate(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let Some(token) = bearer(request.headers()).map(str::to_string) else {
        return missing().into_response();
    };
    match engine::auth::tokens::verify(&state.services.pool, &token).await {
        Ok(Some(viewer)) => {
            request.extensions_mut().insert(Caller(viewer));
            next.run(request).await
        }
        Ok(None) => ApiError::unauthorized(
            "the token is unknown, revoked or expired, or its account is disabled; create a new one on \
             the Tokens page (/tokens)",
        )
        .into_response(),
        Err(e) => {
            tracing::error!(error = %e, "verifying an API token failed");
            ApiError::unavailable().into_response()
        }
    }
}

/// Extractors that admit a caller with at least their role, checked before the request's body
/// is read: a caller without the role is told so even when their body would not parse.
macro_rules! role_extractor {
    ($(#[$doc:meta])* $name:ident, $role:expr) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        pub struct $name(pub Viewer);

        impl<S: Send + Sync> FromRequestParts<S> for $name {
            type Rejection = ApiError;

            async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
                let caller = Caller::from_request_parts(parts, state).await?;
                caller.require($role).cloned().map($name)
            }
        }
    };
}

role_extractor!(
    /// An engineer or admin (runs, exports, endpoints, datasets).
    Engineer,
    Role::Engineer
);
role_extractor!(
    /// Any signed-in role from reviewer up (samples and their review).
    Reviewer,
    Role::Reviewer
);
