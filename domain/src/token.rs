//! Personal API tokens as the Tokens page shows them (never the secret itself).

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// Longest life a token may be given, in days.
pub const MAX_TOKEN_DAYS: u32 = 365;

/// The prefix every token starts with, so a leaked one is recognisable in logs and scanners.
pub const TOKEN_PREFIX: &str = "ds_";

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenSummary {
    pub id: i64,
    pub user_id: i64,
    pub username: String,
    pub name: String,
    pub created_at: OffsetDateTime,
    pub expires_at: OffsetDateTime,
    pub last_used_at: Option<OffsetDateTime>,
    pub revoked_at: Option<OffsetDateTime>,
}

impl TokenSummary {
    /// Usable now: neither revoked nor past its expiry.
    pub fn is_active(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && self.expires_at > now
    }
}

/// A token just made: the plaintext is in this value only, once.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatedToken {
    pub token: String,
    pub summary: TokenSummary,
}
