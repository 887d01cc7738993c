//! Accounts: password hashing, the users table, and signing in with a rate limit.

mod login;
mod password;
pub mod tokens;
mod users;

pub use login::{LoginLimiter, LoginRequest};
pub use password::{hash_password, validate_password, verify_password, MIN_PASSWORD_LEN};
pub use users::{
    count_users, create_user, find_viewer, list_users, normalize_username, set_disabled, set_password,
    set_role, NewUser,
};

/// The session key under which the signed-in user's id is kept.
pub const SESSION_USER_ID: &str = "user_id";
