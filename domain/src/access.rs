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
    ("/acceptance", "Acceptance", Role::Engineer),
    ("/endpoints", "Endpoints", Role::Engineer),
    ("/tokens", "Tokens", Role::Reviewer),
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

/// Server-function namespaces (the part of `/api/<namespace>/<name>` before the slash) and the
/// role each needs. The server enforces this before a call's arguments are even read; each
/// function checks its role again, and may demand more (bulk review actions need an engineer).
pub const API_NAMESPACES: &[(&str, PageAccess)] = &[
    ("auth", PageAccess::Public),
    ("users", PageAccess::Requires(Role::Admin)),
    ("datasets", PageAccess::Requires(Role::Engineer)),
    ("endpoints", PageAccess::Requires(Role::Engineer)),
    ("runs", PageAccess::Requires(Role::Engineer)),
    ("exports", PageAccess::Requires(Role::Engineer)),
    ("acceptance", PageAccess::Requires(Role::Engineer)),
    ("review", PageAccess::Requires(Role::Reviewer)),
    // The home page: every role; the function leaves out what the caller's role may not see.
    ("overview", PageAccess::Requires(Role::Reviewer)),
    // Every account manages its own tokens; the functions widen the view for admins.
    ("tokens", PageAccess::Requires(Role::Reviewer)),
    // The versioned API authenticates bearer tokens itself and checks each route's role
    // (server/src/api); session cookies are not accepted there.
    ("v1", PageAccess::Public),
];

/// The rule for a server-function path, or `None` when it is in no known namespace (refused).
pub fn api_access(path: &str) -> Option<PageAccess> {
    let rest = path.strip_prefix("/api/")?;
    let namespace = rest.split('/').next()?;
    API_NAMESPACES.iter().find(|(ns, _)| *ns == namespace).map(|(_, access)| *access)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_functions_are_ruled_by_namespace() {
        assert_eq!(api_access("/api/auth/login"), Some(PageAccess::Public));
        assert_eq!(api_access("/api/users/list"), Some(PageAccess::Requires(Role::Admin)));
        assert_eq!(api_access("/api/review/next"), Some(PageAccess::Requires(Role::Reviewer)));
        assert_eq!(api_access("/api/secret/thing"), None);
        assert_eq!(api_access("/other"), None);
    }

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
