//! The Tokens page: personal API tokens for scripts and pipelines (see docs/api.md). Every
//! signed-in account manages its own; admins see and revoke everyone's.

use crate::{components::time::RelativeTime, users::confirm, AppError};
use domain::token::{CreatedToken, TokenSummary, MAX_TOKEN_DAYS};
#[cfg(feature = "ssr")]
use domain::Role;
use leptos::prelude::*;
use leptos_meta::Title;

#[server(endpoint = "tokens/list")]
pub async fn list_tokens() -> Result<Vec<TokenSummary>, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    Ok(engine::auth::tokens::list(&ssr::services()?.pool, &viewer).await?)
}

/// Makes a token for the signed-in account; the plaintext is returned this once.
#[server(endpoint = "tokens/create")]
pub async fn create_token(name: String, days: String) -> Result<CreatedToken, AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    let days: u32 = days.trim().parse().map_err(|_| {
        AppError::Invalid(format!("the expiry must be a whole number of days (1 to {MAX_TOKEN_DAYS})"))
    })?;
    let created = engine::auth::tokens::create(&ssr::services()?.pool, viewer.id, &name, days).await?;
    tracing::info!(by = %viewer.username, token = created.summary.id, "API token created");
    Ok(created)
}

#[server(endpoint = "tokens/revoke")]
pub async fn revoke_token(id: i64) -> Result<(), AppError> {
    use crate::ssr;
    let viewer = ssr::require(Role::Reviewer)?;
    engine::auth::tokens::revoke(&ssr::services()?.pool, &viewer, id).await?;
    tracing::info!(by = %viewer.username, token = id, "API token revoked");
    Ok(())
}

#[component]
pub fn TokensPage() -> impl IntoView {
    let create = ServerAction::<CreateToken>::new();
    let revoke = ServerAction::<RevokeToken>::new();
    let tokens = Resource::new(move || (create.version().get(), revoke.version().get()), |_| list_tokens());
    let error = move || {
        [create.value().get().and_then(|r| r.err()), revoke.value().get().and_then(|r| r.err())]
            .into_iter()
            .flatten()
            .next()
            .map(|e| e.to_string())
    };
    let fresh = move || create.value().get().and_then(|r| r.ok());

    view! {
        <Title text="API tokens"/>
        <h1>"API tokens"</h1>
        <p class="muted">
            "A token lets a script call the HTTP API (/api/v1) or the draft-studio CLI as you, with your role. "
            "Send it as "<code>"Authorization: Bearer <token>"</code>". "
            <a href="/api/v1/docs">"API reference"</a>
        </p>
        <section class="panel">
            <h2>"Create a token"</h2>
            <ActionForm action=create attr:class="inline-form" attr:data-testid="create-token">
                <label>"Name" <input name="name" required maxlength="100" placeholder="training-cron" autocomplete="off"/></label>
                <label>"Expires after (days)" <input name="days" type="number" min="1" max=MAX_TOKEN_DAYS.to_string() value="90" required/></label>
                <button class="primary" type="submit">"Create token"</button>
            </ActionForm>
            {move || fresh().map(|created| view! {
                <div class="notice" data-testid="new-token">
                    <p>"Copy this token now: it is shown only once."</p>
                    <pre class="mono">{created.token}</pre>
                </div>
            })}
            <Show when=move || error().is_some()>
                <p class="error" role="alert">{error}</p>
            </Show>
        </section>
        <Transition fallback=|| view! { <p class="muted">"Loading tokens…"</p> }>
            {move || Suspend::new(async move {
                match tokens.await {
                    Err(e) => view! { <p class="error">{e.to_string()}</p> }.into_any(),
                    Ok(list) if list.is_empty() => view! {
                        <p class="empty">"No tokens yet. Create one above to call the API from a script."</p>
                    }.into_any(),
                    Ok(list) => view! {
                        <table class="data" data-testid="tokens-table">
                            <thead>
                                <tr><th>"Name"</th><th>"Owner"</th><th>"Status"</th><th>"Last used"</th><th>"Expires"</th><th>"Created"</th><th></th></tr>
                            </thead>
                            <tbody>
                                {list.into_iter().map(|t| view! { <TokenRow token=t revoke/> }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                }
            })}
        </Transition>
    }
}

#[component]
fn TokenRow(token: TokenSummary, revoke: ServerAction<RevokeToken>) -> impl IntoView {
    let id = token.id;
    let active = token.is_active(time::OffsetDateTime::now_utc());
    let status = match (token.revoked_at.is_some(), active) {
        (true, _) => view! { <span class="badge warn">"revoked"</span> }.into_any(),
        (false, false) => view! { <span class="badge warn">"expired"</span> }.into_any(),
        (false, true) => view! { <span class="badge ok">"active"</span> }.into_any(),
    };
    let question = format!(
        "Revoke the token {:?} of {}? Scripts using it stop working at once.",
        token.name, token.username
    );
    let on_revoke = move |_| {
        if confirm(&question) {
            revoke.dispatch(RevokeToken { id });
        }
    };
    view! {
        <tr data-token-name=token.name.clone()>
            <td>{token.name.clone()}</td>
            <td>{token.username.clone()}</td>
            <td>{status}</td>
            <td>{token.last_used_at.map(|at| view! { <RelativeTime at/> }.into_any()).unwrap_or_else(|| "never".into_any())}</td>
            <td><RelativeTime at=token.expires_at/></td>
            <td><RelativeTime at=token.created_at/></td>
            <td class="actions">
                {active.then(|| view! { <button class="link" on:click=on_revoke>"Revoke"</button> })}
            </td>
        </tr>
    }
}
