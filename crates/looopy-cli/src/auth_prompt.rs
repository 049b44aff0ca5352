//! Authorization in the terminal: where credentials are kept (`--secret-key-file`,
//! `LOOOPY_SECRET_KEY`), the hidden prompt for keys and tokens, and — for OAuth — the
//! printed authorization URL and a loopback listener that the browser comes back to.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, OnceLock};

use anyhow::{Context, Result};
use axum::extract::{Query, State};
use axum::response::Html;
use looopy_agent::auth::{
    AuthType, CredentialStore, MemoryCredentials, SealedCredentials, SecretKey,
};
use looopy_agent::{Agent, InputSource, PendingAuthView, TurnHandle};
use looopy_protocol::TaskState;
use looopy_store::Store;
use tokio::sync::{Mutex, mpsc};

use crate::cli::AgentArgs;
use crate::run_cmd::Lines;

/// The environment variable holding the key (hex or base64) when no file is given.
pub const SECRET_KEY_ENV: &str = "LOOOPY_SECRET_KEY";

/// The credential store: sealed in the database with the configured key, or in memory
/// (said once on stderr when something asks for a credential).
pub fn credential_store(store: &Store, args: &AgentArgs) -> Result<Arc<dyn CredentialStore>> {
    let key = match (&args.secret_key_file, std::env::var(SECRET_KEY_ENV)) {
        (Some(path), _) => Some(
            SecretKey::from_file(path)
                .with_context(|| format!("reading --secret-key-file {}", path.display()))?,
        ),
        (None, Ok(text)) if !text.trim().is_empty() => {
            Some(SecretKey::parse(&text).with_context(|| format!("reading {SECRET_KEY_ENV}"))?)
        }
        _ => None,
    };
    Ok(match key {
        Some(key) => Arc::new(SealedCredentials::new(store.clone(), key)),
        None => Arc::new(MemoryCredentials::default()),
    })
}

/// Turns resumed by the loopback OAuth callback, for the run waiting on them.
static CALLBACKS: OnceLock<Mutex<mpsc::Receiver<TurnHandle>>> = OnceLock::new();

/// Listens on a loopback port for the browser coming back from an authorization server,
/// and makes that the agent's OAuth redirect URI. For `run` and `chat` (the server has its
/// own callback route).
pub async fn start_callback(agent: &Agent) -> Result<()> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .context("binding the OAuth callback listener")?;
    let addr = listener.local_addr()?;
    let (tx, rx) = mpsc::channel(4);
    let _ = CALLBACKS.set(Mutex::new(rx));
    let app = axum::Router::new()
        .route("/v1/oauth/callback", axum::routing::get(callback))
        .with_state((agent.clone(), tx));
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::warn!(%error, "OAuth callback listener stopped");
        }
    });
    agent.set_oauth_redirect_uri(format!("http://{addr}/v1/oauth/callback"));
    Ok(())
}

type CallbackState = (Agent, mpsc::Sender<TurnHandle>);

async fn callback(
    State((agent, tx)): State<CallbackState>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Html<String> {
    let field = |k: &str| query.get(k).map(String::as_str).unwrap_or_default();
    if !field("error").is_empty() {
        return Html(format!(
            "<h1>Not authorized</h1><p>{}</p>",
            escape(field("error"))
        ));
    }
    match agent.complete_oauth(field("state"), field("code")).await {
        Ok(handle) => {
            let _ = tx.send(handle).await;
            Html("<h1>Authorized</h1><p>Back to the terminal: the task goes on. You can close this tab.</p>".into())
        }
        Err(error) => Html(format!(
            "<h1>Authorization failed</h1><p>{}</p>",
            escape(&error.to_string())
        )),
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Answers the authorization request of `task_id` (waiting in `waiting-auth`) at the
/// terminal: a key or token is read hidden (from a TTY) or as a line of piped stdin; an
/// OAuth URL is printed and the browser's return awaited. The resumed turn, or `None` when
/// nothing answered (stdin closed, or no way to ask): the task keeps waiting.
pub async fn answer(
    agent: &Agent,
    task_id: &str,
    lines: Option<&mut Lines>,
) -> Result<Option<TurnHandle>> {
    let Some(task) = agent.store().get_task(task_id).await? else {
        return Ok(None);
    };
    if task.state != TaskState::WaitingAuth {
        return Ok(None);
    }
    let Some(view) = PendingAuthView::of(&task) else {
        return Ok(None);
    };
    if !agent.credential_store().is_durable() {
        crate::render::note(
            "[looopy] no secret key configured (--secret-key-file or LOOOPY_SECRET_KEY): this credential is kept in memory only, for this process",
        );
    }
    if let (AuthType::Oauth2, Some(url)) = (view.auth_type, view.auth_url.as_deref()) {
        if agent.oauth_redirect_uri().is_some() {
            eprintln!(
                "🔒 {} — open this URL to authorize {}:\n   {url}",
                view.prompt, view.provider
            );
            eprintln!("   (or paste an access token and press Enter)");
            return oauth_or_token(agent, task_id, &view, lines).await;
        }
    }
    let secret = read_secret(&view, lines).await?;
    let Some(secret) = secret else {
        return Ok(None);
    };
    submit(agent, task_id, &view, secret).await.map(Some)
}

async fn submit(
    agent: &Agent,
    task_id: &str,
    view: &PendingAuthView,
    secret: String,
) -> Result<TurnHandle> {
    let credentials = serde_json::Value::String(secret);
    agent
        .provide_credentials(
            task_id,
            &view.auth_id,
            &credentials,
            InputSource::user(None),
        )
        .await
        .map_err(Into::into)
}

/// Waits for the browser's return or a pasted token, whichever comes first.
async fn oauth_or_token(
    agent: &Agent,
    task_id: &str,
    view: &PendingAuthView,
    lines: Option<&mut Lines>,
) -> Result<Option<TurnHandle>> {
    let Some(callbacks) = CALLBACKS.get() else {
        return Ok(None);
    };
    let mut callbacks = callbacks.lock().await;
    let typed = async {
        match lines {
            Some(lines) => lines.next().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        handle = callbacks.recv() => Ok(handle),
        token = typed => match token.filter(|t| !t.trim().is_empty()) {
            Some(token) => submit(agent, task_id, view, token).await.map(Some),
            None => Ok(None),
        },
        _ = tokio::signal::ctrl_c() => Ok(None),
    }
}

/// The key or token: hidden from a terminal, else the next line of stdin.
async fn read_secret(view: &PendingAuthView, lines: Option<&mut Lines>) -> Result<Option<String>> {
    let what = match view.auth_type {
        AuthType::Bearer => "token",
        AuthType::Oauth2 => "access token",
        _ => "key",
    };
    let prompt = format!(
        "🔒 {} ({} for {}, input hidden): ",
        view.prompt, what, view.provider
    );
    if std::io::stdin().is_terminal() {
        // Hidden typing needs the terminal itself, on a blocking thread.
        let answer = tokio::task::spawn_blocking(move || rpassword::prompt_password(prompt))
            .await
            .context("reading the secret")?;
        return Ok(answer.ok().filter(|s| !s.trim().is_empty()));
    }
    eprint!("{prompt}");
    let _ = std::io::stderr().flush();
    let line = match lines {
        Some(lines) => lines.next().await,
        None => tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            match std::io::stdin().read_line(&mut line) {
                Ok(0) | Err(_) => None,
                Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
            }
        })
        .await
        .context("reading the secret")?,
    };
    eprintln!();
    Ok(line.filter(|s| !s.trim().is_empty()))
}
