//! Which role each page needs. The server enforces this table on every page request (and each
//! server function checks its own role); the UI uses it only to decide which links to show.

use crate::Role;

/// What a page path requires.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageAccess {
    /// Anyone, signed in or not (the login page).
    Public,
    /// A signed-in user with at least this role.
    Requires(Role),
}

/// Top-level sections of the app, in navigation order, with the role each needs.
pub const SECTIONS: &[(&str, &str, Role)] = &[
    ("/datasets", "Datasets", Role::Engineer),
    ("/runs", "Runs", Role::Engineer),
    ("/review", "Review", Role::Reviewer),
    ("/exports", "Exports", Role::Engineer),
    ("/endpoints", "Endpoints", Role::Engineer),
    ("/users", "Users", Role::Admin),
];

/// The access rule for a page path (no query string). Unknown paths need a signed-in reviewer,
/// so that even a 404 page is not shown to anonymous visitors.
pub fn page_access(path: &str) -> PageAccess {
    if path == "/login" {
        return PageAccess::Public;
    }
    for (prefix, _, role) in SECTIONS {
        if path == *prefix || path.starts_with(&format!("{prefix}/")) {
            return PageAccess::Requires(*role);
        }
    }
    PageAccess::Requires(Role::Reviewer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_and_their_subpages_share_a_rule() {
        assert_eq!(page_access("/users"), PageAccess::Requires(Role::Admin));
        assert_eq!(page_access("/users/3"), PageAccess::Requires(Role::Admin));
        assert_eq!(page_access("/runs/12"), PageAccess::Requires(Role::Engineer));
        assert_eq!(page_access("/review/samples/9"), PageAccess::Requires(Role::Reviewer));
    }

    #[test]
    fn a_prefix_is_matched_on_segment_boundaries_only() {
        // "/usersettings" is not under "/users".
        assert_eq!(page_access("/usersettings"), PageAccess::Requires(Role::Reviewer));
    }

    #[test]
    fn login_is_public_and_everything_else_needs_a_session() {
        assert_eq!(page_access("/login"), PageAccess::Public);
        assert_eq!(page_access("/"), PageAccess::Requires(Role::Reviewer));
        assert_eq!(page_access("/nope"), PageAccess::Requires(Role::Reviewer));
    }
}
