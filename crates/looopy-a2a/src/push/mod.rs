//! A2A push notifications: the config operations every transport calls (JSON-RPC here,
//! REST and gRPC through the same functions), the wire messages, and the webhook URL
//! policy ([`url`]).
//!
//! A config is a webhook for one task, stored with the task's owner
//! ([`PushConfigRecord`]); the host's delivery worker (`looopy-server`'s `push` module)
//! POSTs the task's stream items to it from the event log. The operations need the host
//! to deliver ([`A2aHost::push_settings`]); without it they answer
//! `PushNotificationNotSupported`, as the specification asks.
//!
//! Decisions where the specification is silent:
//! - A config created with `SendMessage` (`configuration.taskPushNotificationConfig`,
//!   v0.3 `pushNotificationConfig`) receives the task from its first item; one created
//!   later with `CreateTaskPushNotificationConfig` receives what the task does after.
//! - `token` and `authentication.credentials` are write-only: stored, sent to the webhook,
//!   never returned by `Get`/`List` nor logged.
//! - Without an `id` a config gets a new one; creating with an existing `id` replaces that
//!   config (v0.3's "set or update"). At most [`MAX_CONFIGS_PER_TASK`] per task.
//! - Each notification carries `X-A2A-Notification-Id: <taskId>:<seq>:<index>` (the
//!   event's log `seq` and the item's index among the items that event produced): the
//!   same notification always has the same id, so a receiver dedupes redeliveries on it.

mod rpc;
pub mod url;
pub mod wire;

pub(crate) use rpc::{call_v1, call_v03};

use chrono::Utc;
use looopy_protocol::EventPayload;
use looopy_protocol::ids::{is_valid_id, new_id};
use looopy_store::{PushConfigRecord, Store, StoreError};

use crate::http::RpcError;
use crate::http::ops::Caller;
use crate::{A2aHost, ErrorKind, ProtocolVersion, TurnStarted, v1, v03};

pub use url::{WebhookUrlError, check_webhook_url, is_forbidden_ip, resolve_public};

/// Most webhooks one task may have.
pub const MAX_CONFIGS_PER_TASK: usize = 16;
/// The header carrying a notification's idempotency key.
pub const NOTIFICATION_ID_HEADER: &str = "X-A2A-Notification-Id";
/// The header carrying the config's `token`.
pub const NOTIFICATION_TOKEN_HEADER: &str = "X-A2A-Notification-Token";
/// Longest accepted token, scheme or credentials.
const MAX_SECRET_LEN: usize = 4096;

/// The idempotency key of the `index`-th notification produced by event `seq` of a task.
pub fn notification_id(task_id: &str, seq: u64, index: usize) -> String {
    format!("{task_id}:{seq}:{index}")
}

/// How a host delivers push notifications.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PushSettings {
    /// Accept webhooks on private, loopback and link-local addresses (tests, trusted
    /// networks); refused otherwise.
    pub allow_private: bool,
}

impl PushSettings {
    pub fn new(allow_private: bool) -> Self {
        Self { allow_private }
    }
}

/// A webhook as a client describes it, version-neutral.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct PushConfigInput {
    pub(crate) id: Option<String>,
    pub(crate) url: String,
    pub(crate) token: Option<String>,
    pub(crate) auth_scheme: Option<String>,
    pub(crate) credentials: Option<String>,
}

impl From<v1::TaskPushNotificationConfig> for PushConfigInput {
    fn from(c: v1::TaskPushNotificationConfig) -> Self {
        let (auth_scheme, credentials) = match c.authentication {
            Some(a) => (Some(a.scheme), a.credentials),
            None => (None, None),
        };
        Self {
            id: c.id.filter(|id| !id.is_empty()),
            url: c.url,
            token: c.token.filter(|t| !t.is_empty()),
            auth_scheme: auth_scheme.filter(|s| !s.is_empty()),
            credentials: credentials.filter(|c| !c.is_empty()),
        }
    }
}

impl From<v03::PushNotificationConfig> for PushConfigInput {
    fn from(c: v03::PushNotificationConfig) -> Self {
        // v0.3 lists acceptable schemes; the server picks the first one it can send.
        let (auth_scheme, credentials) = match c.authentication {
            Some(a) => (a.schemes.into_iter().next(), a.credentials),
            None => (None, None),
        };
        Self {
            id: c.id.filter(|id| !id.is_empty()),
            url: c.url,
            token: c.token.filter(|t| !t.is_empty()),
            auth_scheme: auth_scheme.filter(|s| !s.is_empty()),
            credentials: credentials.filter(|c| !c.is_empty()),
        }
    }
}

/// A config as `Get`/`List` answer it over v1.0: without its secrets.
pub fn config_to_v1(record: &PushConfigRecord) -> v1::TaskPushNotificationConfig {
    v1::TaskPushNotificationConfig {
        tenant: None,
        id: Some(record.config_id.clone()),
        task_id: Some(record.task_id.clone()),
        url: record.url.clone(),
        token: None,
        authentication: record
            .auth_scheme
            .as_ref()
            .map(|scheme| v1::AuthenticationInfo {
                scheme: scheme.clone(),
                credentials: None,
            }),
    }
}

/// A config as v0.3 answers it: without its secrets.
pub fn config_to_v03(record: &PushConfigRecord) -> wire::TaskPushNotificationConfigV03 {
    wire::TaskPushNotificationConfigV03 {
        task_id: record.task_id.clone(),
        push_notification_config: v03::PushNotificationConfig {
            id: Some(record.config_id.clone()),
            url: record.url.clone(),
            token: None,
            authentication: record.auth_scheme.as_ref().map(|scheme| {
                v03::PushNotificationAuthenticationInfo {
                    schemes: vec![scheme.clone()],
                    credentials: None,
                }
            }),
        },
    }
}

/// The host's push settings, or `PushNotificationNotSupported`.
fn settings<H: A2aHost>(caller: &Caller<H>) -> Result<PushSettings, RpcError> {
    caller.host.push_settings().ok_or_else(|| {
        RpcError::new(
            ErrorKind::PushNotificationNotSupported,
            "Push Notification is not supported: stream the task or poll it with GetTask",
        )
    })
}

/// Checks a config's fields (never echoing a secret) and its URL.
async fn validate(input: &PushConfigInput, settings: PushSettings) -> Result<(), RpcError> {
    if let Some(id) = &input.id {
        if !is_valid_id(id) {
            return Err(RpcError::invalid_params(
                "id must be 1-128 characters of letters, digits, '-', '_', '.' or ':'",
            ));
        }
    }
    let header_safe = |value: &str| {
        value.len() <= MAX_SECRET_LEN && value.bytes().all(|b| (0x20..0x7f).contains(&b))
    };
    for (field, value) in [
        ("token", &input.token),
        ("authentication.credentials", &input.credentials),
    ] {
        if value.as_deref().is_some_and(|v| !header_safe(v)) {
            return Err(RpcError::invalid_params(format_args!(
                "{field} must be at most {MAX_SECRET_LEN} printable ASCII characters"
            )));
        }
    }
    if let Some(scheme) = &input.auth_scheme {
        let token_char = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
        if scheme.len() > 64 || !scheme.bytes().all(token_char) {
            return Err(RpcError::invalid_params(
                "authentication.scheme must be an HTTP authentication scheme name (e.g. Bearer)",
            ));
        }
    }
    url::check_webhook_url(&input.url, settings.allow_private)
        .await
        .map_err(|e| RpcError::invalid_params(format_args!("pushNotificationConfig.{e}")))?;
    Ok(())
}

/// The task if the caller may see it (a malformed id names no task).
async fn authorize<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
) -> Result<looopy_store::TaskRecord, RpcError> {
    if !is_valid_id(task_id) {
        return Err(RpcError::task_not_found(task_id));
    }
    Ok(caller.host.authorize_task(&caller.who, task_id).await?)
}

/// Stores a config and hands it to the host's delivery worker.
async fn save<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
    context_id: &str,
    input: PushConfigInput,
    from_seq: u64,
    cursor: u64,
) -> Result<PushConfigRecord, RpcError> {
    let store = caller.host.agent().store();
    let existing = store.list_push_configs(task_id).await?;
    let replaces = input
        .id
        .as_ref()
        .is_some_and(|id| existing.iter().any(|c| c.config_id == *id));
    if !replaces && existing.len() >= MAX_CONFIGS_PER_TASK {
        return Err(RpcError::invalid_params(format_args!(
            "task {task_id} already has {MAX_CONFIGS_PER_TASK} push notification configs; delete one first"
        )));
    }
    let record = PushConfigRecord {
        task_id: task_id.to_owned(),
        config_id: input.id.unwrap_or_else(|| new_id("push")),
        context_id: context_id.to_owned(),
        owner: H::owner(&caller.who).map(str::to_owned),
        protocol: caller.version.as_str().to_owned(),
        url: input.url,
        token: input.token,
        auth_scheme: input.auth_scheme,
        credentials: input.credentials,
        from_seq,
        cursor,
        done: false,
        created_at: Utc::now(),
    };
    store.put_push_config(&record).await?;
    tracing::info!(
        task_id,
        config_id = %record.config_id,
        protocol = %record.protocol,
        "push notification config saved"
    );
    caller.host.push_config_saved(&record);
    Ok(record)
}

/// The `seq` just before the task's first event in its context's log (where a mapping of
/// the whole task starts), or `None` when the task has no events yet.
async fn before_first_event(
    store: &Store,
    context_id: &str,
    task_id: &str,
) -> Result<Option<u64>, StoreError> {
    const PAGE: usize = 1024;
    let log = store.event_log();
    let mut after = 0;
    loop {
        let page = log.read_after(context_id, after, PAGE).await?;
        if let Some(first) = page.iter().find(|e| e.task_id == task_id) {
            return Ok(Some(first.seq.saturating_sub(1)));
        }
        match page.last() {
            Some(last) if page.len() == PAGE => after = last.seq,
            _ => return Ok(None),
        }
    }
}

/// `CreateTaskPushNotificationConfig` / `tasks/pushNotificationConfig/set`: the webhook
/// receives the task's items logged from now on.
pub(crate) async fn create<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
    input: PushConfigInput,
) -> Result<PushConfigRecord, RpcError> {
    let settings = settings(caller)?;
    let task = authorize(caller, task_id).await?;
    validate(&input, settings).await?;
    let store = caller.host.agent().store();
    let now = store.event_log().last_seq(&task.context_id).await?;
    let from = before_first_event(store, &task.context_id, task_id)
        .await?
        .unwrap_or(now);
    save(caller, task_id, &task.context_id, input, from, now).await
}

/// `GetTaskPushNotificationConfig` / `tasks/pushNotificationConfig/get`. Without a config
/// id (v0.3 `TaskIdParams`), the task's first config.
pub(crate) async fn get<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
    config_id: Option<&str>,
) -> Result<PushConfigRecord, RpcError> {
    settings(caller)?;
    authorize(caller, task_id).await?;
    let store = caller.host.agent().store();
    let found = match config_id {
        Some(id) => store.get_push_config(task_id, id).await?,
        None => store.list_push_configs(task_id).await?.into_iter().next(),
    };
    found.ok_or_else(|| {
        RpcError::new(
            ErrorKind::TaskNotFound,
            format!(
                "push notification config {} of task {task_id} not found",
                config_id.unwrap_or("(any)")
            ),
        )
    })
}

/// `ListTaskPushNotificationConfigs` / `tasks/pushNotificationConfig/list`: every config of
/// the task, oldest first (one page: there are at most [`MAX_CONFIGS_PER_TASK`]).
pub(crate) async fn list<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
) -> Result<Vec<PushConfigRecord>, RpcError> {
    settings(caller)?;
    authorize(caller, task_id).await?;
    Ok(caller
        .host
        .agent()
        .store()
        .list_push_configs(task_id)
        .await?)
}

/// `DeleteTaskPushNotificationConfig` / `tasks/pushNotificationConfig/delete`: idempotent;
/// the worker stops before its next notification.
pub(crate) async fn delete<H: A2aHost>(
    caller: &Caller<H>,
    task_id: &str,
    config_id: &str,
) -> Result<(), RpcError> {
    settings(caller)?;
    authorize(caller, task_id).await?;
    let deleted = caller
        .host
        .agent()
        .store()
        .delete_push_config(task_id, config_id)
        .await?;
    if deleted {
        tracing::info!(task_id, config_id, "push notification config deleted");
    }
    Ok(())
}

/// The webhook of a `SendMessage`, checked before the turn starts so a bad URL refuses
/// the message instead of leaving a task without its webhook.
pub(crate) async fn prepare<H: A2aHost>(
    caller: &Caller<H>,
    input: Option<PushConfigInput>,
) -> Result<Option<PushConfigInput>, RpcError> {
    let Some(input) = input else {
        return Ok(None);
    };
    validate(&input, settings(caller)?).await?;
    Ok(Some(input))
}

/// Stores the webhook of a `SendMessage` once its turn started: a new task is delivered
/// from its first item, a resumed one from the resumption on.
pub(crate) async fn attach<H: A2aHost>(
    caller: &Caller<H>,
    started: &TurnStarted,
    input: Option<PushConfigInput>,
) -> Result<(), RpcError> {
    let Some(input) = input else {
        return Ok(());
    };
    let store = caller.host.agent().store();
    // A new task's first event follows the turn's start; only a resumed task's history
    // needs a scan of the context.
    let next = store
        .event_log()
        .read_after(&started.context_id, started.start_seq, 1)
        .await?;
    let fresh = next.first().is_some_and(|e| {
        e.task_id == started.task_id && matches!(e.payload, EventPayload::TaskCreated(_))
    });
    let from = if fresh {
        started.start_seq
    } else {
        before_first_event(store, &started.context_id, &started.task_id)
            .await?
            .map_or(started.start_seq, |first| first.min(started.start_seq))
    };
    save(
        caller,
        &started.task_id,
        &started.context_id,
        input,
        from,
        started.start_seq,
    )
    .await?;
    Ok(())
}

/// Whether an event ends a task's notifications (its last event).
pub fn ends_notifications(payload: &EventPayload) -> bool {
    matches!(payload, EventPayload::TaskComplete(_))
}

/// The protocol version a stored config speaks (unknown values are v1.0).
pub fn config_version(record: &PushConfigRecord) -> ProtocolVersion {
    match record.protocol.as_str() {
        "0.3" => ProtocolVersion::V0_3,
        _ => ProtocolVersion::V1_0,
    }
}
