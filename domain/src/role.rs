use serde::{Deserialize, Serialize};
use std::{fmt, str::FromStr};

/// What a signed-in user may do. Roles are ordered: each one can do everything the one below it
/// can (reviewer < engineer < admin), so a check is a single comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "sqlx", derive(sqlx::Type))]
#[cfg_attr(feature = "sqlx", sqlx(type_name = "user_role", rename_all = "lowercase"))]
pub enum Role {
    /// Reads samples and records review decisions.
    Reviewer,
    /// Registers datasets and endpoints, launches runs, exports training sets.
    Engineer,
    /// Everything, plus managing user accounts.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Reviewer, Role::Engineer, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Reviewer => "reviewer",
            Role::Engineer => "engineer",
            Role::Admin => "admin",
        }
    }

    /// True when a user with this role may do what `required` allows.
    pub fn allows(self, required: Role) -> bool {
        self >= required
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("unknown role `{0}`: expected one of admin, engineer, reviewer")]
pub struct UnknownRole(pub String);

impl FromStr for Role {
    type Err = UnknownRole;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "reviewer" => Ok(Role::Reviewer),
            "engineer" => Ok(Role::Engineer),
            "admin" => Ok(Role::Admin),
            _ => Err(UnknownRole(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_by_power() {
        assert!(Role::Admin.allows(Role::Engineer));
        assert!(Role::Engineer.allows(Role::Reviewer));
        assert!(!Role::Reviewer.allows(Role::Engineer));
        assert!(!Role::Engineer.allows(Role::Admin));
    }

    #[test]
    fn parses_case_insensitively_and_names_the_choices_on_error() {
        assert_eq!("Admin".parse::<Role>(), Ok(Role::Admin));
        let err = "root".parse::<Role>().unwrap_err();
        assert!(err.to_string().contains("admin, engineer, reviewer"));
    }
}
