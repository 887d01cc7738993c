//! The admin's Users page: add accounts, change roles, disable and re-enable.

use crate::{components::time::RelativeTime, AppError};
use domain::{Role, UserSummary, Viewer};
use leptos::prelude::*;
use leptos_meta::Title;

#[server(endpoint = "users/list")]
pub async fn list_users() -> Result<Vec<UserSummary>, AppError> {
    use crate::ssr;
    ssr::require(Role::Admin)?;
    Ok(engine::auth::list_users(&ssr::services()?.pool).await?)
}

#[server(endpoint = "users/create")]
pub async fn create_user(username: String, password: String, role: Role) -> Result<UserSummary, AppError> {
    use crate::ssr;
    let admin = ssr::require(Role::Admin)?;
    let pool = ssr::services()?.pool;
    let user = engine::auth::create_user(
        &pool,
        engine::auth::NewUser { username: &username, password: &password, role },
    )
    .await?;
    tracing::info!(by = %admin.username, user = %user.username, role = %user.role, "user added");
    Ok(user)
}

#[server(endpoint = "users/set_role")]
pub async fn set_user_role(id: i64, role: Role) -> Result<UserSummary, AppError> {
    use crate::ssr;
    let admin = ssr::require(Role::Admin)?;
    let user = engine::auth::set_role(&ssr::services()?.pool, id, role).await?;
    tracing::info!(by = %admin.username, user = %user.username, role = %role, "role changed");
    Ok(user)
}

#[server(endpoint = "users/set_disabled")]
pub async fn set_user_disabled(id: i64, disabled: bool) -> Result<UserSummary, AppError> {
    use crate::ssr;
    let admin = ssr::require(Role::Admin)?;
    if admin.id == id && disabled {
        return Err(AppError::Invalid("you cannot disable your own account".into()));
    }
    let user = engine::auth::set_disabled(&ssr::services()?.pool, id, disabled).await?;
    tracing::info!(by = %admin.username, user = %user.username, disabled, "account status changed");
    Ok(user)
}

#[component]
pub fn UsersPage() -> impl IntoView {
    let create = ServerAction::<CreateUser>::new();
    let set_role = ServerAction::<SetUserRole>::new();
    let set_disabled = ServerAction::<SetUserDisabled>::new();
    let users = Resource::new(
        move || (create.version().get(), set_role.version().get(), set_disabled.version().get()),
        |_| list_users(),
    );
    let me = use_context::<Viewer>().map(|v| v.id);
    let last_error = move || {
        [
            create.value().get().and_then(|r| r.err()),
            set_role.value().get().and_then(|r| r.err()),
            set_disabled.value().get().and_then(|r| r.err()),
        ]
        .into_iter()
        .flatten()
        .next()
        .map(|e| e.to_string())
    };

    view! {
        <Title text="Users"/>
        <h1>"Users"</h1>
        <section class="panel">
            <h2>"Add a user"</h2>
            <ActionForm action=create attr:class="inline-form" attr:data-testid="add-user">
                <label>"Username" <input name="username" required minlength="2" maxlength="63" autocomplete="off"/></label>
                <label>
                    "Password"
                    <input name="password" type="password" required minlength="10" autocomplete="new-password"/>
                </label>
                <label>
                    "Role"
                    <select name="role">
                        <option value="reviewer" selected>"reviewer"</option>
                        <option value="engineer">"engineer"</option>
                        <option value="admin">"admin"</option>
                    </select>
                </label>
                <button class="primary" type="submit">"Add user"</button>
            </ActionForm>
            <Show when=move || last_error().is_some()>
                <p class="error" role="alert">{last_error}</p>
            </Show>
        </section>
        <Transition fallback=|| view! { <p class="muted">"Loading users…"</p> }>
            {move || Suspend::new(async move {
                match users.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(list) => view! {
                        <table class="data" data-testid="users-table">
                            <thead>
                                <tr><th>"Username"</th><th>"Role"</th><th>"Status"</th><th>"Last sign-in"</th><th>"Added"</th><th></th></tr>
                            </thead>
                            <tbody>
                                {list.into_iter().map(|u| view! { <UserRow user=u me set_role set_disabled/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn UserRow(
    user: UserSummary,
    me: Option<i64>,
    set_role: ServerAction<SetUserRole>,
    set_disabled: ServerAction<SetUserDisabled>,
) -> impl IntoView {
    let id = user.id;
    let is_me = me == Some(id);
    let name = user.username.clone();
    let on_role = move |ev: leptos::ev::Event| {
        if let Ok(role) = event_target_value(&ev).parse::<Role>() {
            set_role.dispatch(SetUserRole { id, role });
        }
    };
    let disabled = user.disabled;
    let toggle = move |_| {
        let question = if disabled {
            format!("Enable {name}? They can sign in again.")
        } else {
            format!("Disable {name}? They are signed out at once and cannot sign in until enabled again.")
        };
        if confirm(&question) {
            set_disabled.dispatch(SetUserDisabled { id, disabled: !disabled });
        }
    };
    view! {
        <tr data-username=user.username.clone()>
            <td>{user.username.clone()} {is_me.then(|| view! { <span class="muted">" (you)"</span> })}</td>
            <td>
                <select on:change=on_role aria-label="Role">
                    {Role::ALL.into_iter().map(|r| view! {
                        <option value=r.as_str() selected=r == user.role>{r.as_str()}</option>
                    }).collect_view()}
                </select>
            </td>
            <td>{if disabled { view! { <span class="badge warn">"disabled"</span> }.into_any() } else { view! { <span class="badge ok">"active"</span> }.into_any() }}</td>
            <td>{user.last_login_at.map(|at| view! { <RelativeTime at/> }.into_any()).unwrap_or_else(|| "never".into_any())}</td>
            <td><RelativeTime at=user.created_at/></td>
            <td class="actions">
                <button class="link" on:click=toggle disabled=is_me && !disabled>
                    {if disabled { "Enable" } else { "Disable" }}
                </button>
            </td>
        </tr>
    }
}

/// Asks once before a destructive action (always yes on the server, where it never runs).
pub fn confirm(question: &str) -> bool {
    #[cfg(feature = "hydrate")]
    {
        window().confirm_with_message(question).unwrap_or(false)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = question;
        true
    }
}
