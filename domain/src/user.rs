use crate::Role;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// The signed-in user as the UI sees it: enough to show who is signed in and to hide links
/// their role cannot use (the server checks the role again on every page and call).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Viewer {
    pub id: i64,
    pub username: String,
    pub role: Role,
}

/// One row of the Users page.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserSummary {
    pub id: i64,
    pub username: String,
    pub role: Role,
    pub disabled: bool,
    pub created_at: OffsetDateTime,
    pub last_login_at: Option<OffsetDateTime>,
}
