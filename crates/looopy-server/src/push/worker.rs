//! One config's worker: follows the task in the event log, maps its events to stream
//! items, POSTs each item after the stored cursor (retrying with backoff), and moves the
//! cursor once an event's items are delivered. See the module docs of [`super`].

use std::time::Duration;

use futures::StreamExt;
use looopy_a2a::push::{config_version, ends_notifications, notification_id};
use looopy_a2a::{MappingState, ProtocolVersion, to_v1, v1, v03};
use looopy_store::{PushConfigRecord, PushLease};
use tokio_util::sync::CancellationToken;

use super::Inner;
use super::deliver;

/// `looopy_push_notifications_total{outcome}`: delivered, retried (a failed attempt that
/// will be retried), gave_up (a notification, and its config, given up), refused.
pub(crate) const PUSH_NOTIFICATIONS_TOTAL: &str = "looopy_push_notifications_total";
/// `looopy_push_delivery_seconds`: one successful POST, request to response.
pub(crate) const PUSH_DELIVERY_SECONDS: &str = "looopy_push_delivery_seconds";

/// How long a worker waits before re-reading the log after a read failed.
const LOG_RETRY: Duration = Duration::from_secs(1);

/// Why a worker stopped before the task's last notification.
enum Stop {
    /// Cancelled (replaced, server stopping), or the config was deleted.
    Quietly,
    /// A notification could not be delivered; the config is finished.
    GaveUp,
}

/// Delivers `config` until its task's last notification or a stop. With `lease` (a store
/// shared by replicas), cursor writes are fenced by it.
pub(super) async fn run(
    inner: &Inner,
    config: PushConfigRecord,
    cancel: CancellationToken,
    lease: Option<&PushLease>,
) {
    let target = deliver::display_target(&config.url);
    tracing::debug!(
        task_id = %config.task_id,
        config_id = %config.config_id,
        webhook = %target,
        cursor = config.cursor,
        "push notification worker started"
    );
    let outcome = follow(inner, &config, &target, &cancel, lease).await;
    if let Err(Stop::GaveUp) = outcome {
        // Finished for good: a restart must not resume it.
        if let Err(error) = store_cursor(inner, &config, lease, 0, true).await {
            tracing::warn!(%error, task_id = %config.task_id, "could not mark a push config given up");
        }
    }
}

/// Delivers until the task's last event (Ok) or a stop.
async fn follow(
    inner: &Inner,
    config: &PushConfigRecord,
    target: &str,
    cancel: &CancellationToken,
    lease: Option<&PushLease>,
) -> Result<(), Stop> {
    let version = config_version(config);
    let log = inner.store.event_log();
    let mut mapping = MappingState::new(config.task_id.clone());
    let mut cursor = config.cursor;
    // The last event read, so a failed read resumes right after it (the mapping state is
    // kept, so it must neither skip nor repeat an event).
    let mut read = config.from_seq;
    loop {
        let events = log.tail(&config.context_id, read);
        let mut events = std::pin::pin!(events);
        loop {
            let next = tokio::select! {
                () = cancel.cancelled() => return Err(Stop::Quietly),
                next = events.next() => next,
            };
            let event = match next {
                // The log closed: the store is shutting down; resume at the next start.
                None => return Err(Stop::Quietly),
                Some(Err(error)) => {
                    tracing::warn!(%error, task_id = %config.task_id, "push worker could not read the event log; retrying");
                    break;
                }
                Some(Ok(event)) => event,
            };
            read = event.seq;
            let own = event.task_id == config.task_id;
            // A sub-agent's (descendant's) events become news of this task (see the mapping).
            if !own && !event.path.contains(&config.task_id) {
                continue;
            }
            let items = to_v1(&event, &mut mapping);
            let last = own && ends_notifications(&event.payload);
            if event.seq > cursor && !items.is_empty() {
                // A deleted config gets nothing more, even after a long pause.
                still_configured(inner, config).await?;
                for (index, item) in items.into_iter().enumerate() {
                    let id = notification_id(&config.task_id, event.seq, index);
                    deliver_with_retry(inner, config, target, version, &id, item, cancel).await?;
                }
                cursor = event.seq;
                save(inner, config, lease, cursor, last).await?;
            } else if last {
                save(inner, config, lease, cursor.max(event.seq), true).await?;
            }
            if last {
                tracing::debug!(task_id = %config.task_id, config_id = %config.config_id, "push notifications complete");
                return Ok(());
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Quietly),
            () = tokio::time::sleep(LOG_RETRY) => {}
        }
    }
}

/// Stops the worker when its config was deleted (or replaced: its replacement has a
/// worker of its own).
async fn still_configured(inner: &Inner, config: &PushConfigRecord) -> Result<(), Stop> {
    match inner
        .store
        .get_push_config(&config.task_id, &config.config_id)
        .await
    {
        Ok(Some(now)) if now.created_at == config.created_at => Ok(()),
        Ok(_) => {
            tracing::debug!(task_id = %config.task_id, config_id = %config.config_id, "push config deleted or replaced; worker stops");
            Err(Stop::Quietly)
        }
        // Unreadable for a moment: deliver (at-least-once), the next check decides.
        Err(error) => {
            tracing::warn!(%error, task_id = %config.task_id, "could not read a push config");
            Ok(())
        }
    }
}

/// Moves the stored cursor (never back: the store keeps the larger one), fenced by the
/// lease when there is one.
async fn store_cursor(
    inner: &Inner,
    config: &PushConfigRecord,
    lease: Option<&PushLease>,
    cursor: u64,
    done: bool,
) -> Result<bool, looopy_store::StoreError> {
    match lease {
        Some(lease) => {
            inner
                .store
                .advance_push_cursor_fenced(lease, cursor, done)
                .await
        }
        None => {
            inner
                .store
                .advance_push_cursor(&config.task_id, &config.config_id, cursor, done)
                .await
        }
    }
}

/// Moves the stored cursor; a deleted config (or a lost lease) stops the worker.
async fn save(
    inner: &Inner,
    config: &PushConfigRecord,
    lease: Option<&PushLease>,
    cursor: u64,
    done: bool,
) -> Result<(), Stop> {
    match store_cursor(inner, config, lease, cursor, done).await {
        Ok(true) => Ok(()),
        Ok(false) => {
            tracing::debug!(task_id = %config.task_id, config_id = %config.config_id, "push config deleted, or its lease taken over; worker stops");
            Err(Stop::Quietly)
        }
        // The notification went out; only its bookkeeping failed: a restart may send it
        // again (at-least-once), nothing is lost.
        Err(error) => {
            tracing::warn!(%error, task_id = %config.task_id, "could not store a push cursor");
            Ok(())
        }
    }
}

/// The notification's body and content type in the config's protocol version.
fn encode(version: ProtocolVersion, item: v1::StreamResponse) -> (&'static str, Vec<u8>) {
    let body = match version {
        ProtocolVersion::V0_3 => serde_json::to_vec(&v03::StreamResponse::from(item)),
        _ => serde_json::to_vec(&item),
    };
    let content_type = match version {
        ProtocolVersion::V0_3 => "application/json",
        _ => "application/a2a+json",
    };
    (content_type, body.unwrap_or_default())
}

/// The wait before attempt `attempt + 1`: `initial · 2^(attempt-1)`, at most `max`, with
/// up to a quarter taken off at random so that webhooks failing together do not retry in
/// lockstep.
fn backoff(initial: Duration, max: Duration, attempt: u32) -> Duration {
    let exp = initial.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let base = exp.min(max);
    let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as u32;
    base.saturating_sub(base.mul_f64(f64::from(jitter) / 4000.0))
}

async fn deliver_with_retry(
    inner: &Inner,
    config: &PushConfigRecord,
    target: &str,
    version: ProtocolVersion,
    id: &str,
    item: v1::StreamResponse,
    cancel: &CancellationToken,
) -> Result<(), Stop> {
    let options = &inner.options;
    let (content_type, body) = encode(version, item);
    let attempts = options.max_attempts.max(1);
    for attempt in 1..=attempts {
        let started = std::time::Instant::now();
        let result = tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Quietly),
            result = deliver::post(&inner.client, options, config, content_type, id, body.clone()) => result,
        };
        let error = match result {
            Ok(()) => {
                metrics::counter!(PUSH_NOTIFICATIONS_TOTAL, "outcome" => "delivered").increment(1);
                metrics::histogram!(PUSH_DELIVERY_SECONDS).record(started.elapsed().as_secs_f64());
                tracing::trace!(
                    notification = id,
                    webhook = target,
                    "push notification delivered"
                );
                return Ok(());
            }
            Err(error) => error,
        };
        if error.is_permanent() {
            metrics::counter!(PUSH_NOTIFICATIONS_TOTAL, "outcome" => "refused").increment(1);
            tracing::warn!(notification = id, webhook = target, %error, "push webhook refused; its deliveries stop");
            return Err(Stop::GaveUp);
        }
        if attempt == attempts {
            metrics::counter!(PUSH_NOTIFICATIONS_TOTAL, "outcome" => "gave_up").increment(1);
            tracing::error!(
                notification = id,
                webhook = target,
                attempts,
                %error,
                "push notification not delivered after every attempt; this config's deliveries stop"
            );
            return Err(Stop::GaveUp);
        }
        metrics::counter!(PUSH_NOTIFICATIONS_TOTAL, "outcome" => "retried").increment(1);
        let wait = backoff(options.initial_backoff, options.max_backoff, attempt);
        tracing::warn!(
            notification = id,
            webhook = target,
            attempt,
            retry_in_ms = wait.as_millis() as u64,
            %error,
            "push notification attempt failed; retrying"
        );
        tokio::select! {
            () = cancel.cancelled() => return Err(Stop::Quietly),
            () = tokio::time::sleep(wait) => {}
        }
    }
    Err(Stop::GaveUp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_bounded_jitter() {
        let (i, m) = (Duration::from_millis(100), Duration::from_secs(1));
        for (attempt, full) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (40, 1000),
        ] {
            let full = Duration::from_millis(full);
            let got = backoff(i, m, attempt);
            assert!(
                got <= full && got >= full.mul_f64(0.75),
                "{attempt}: {got:?}"
            );
        }
    }

    #[test]
    fn bodies_are_the_stream_item_in_the_configs_version() {
        let item = v1::StreamResponse::StatusUpdate(v1::TaskStatusUpdateEvent {
            task_id: "t".into(),
            context_id: "c".into(),
            status: v1::TaskStatus::new(v1::TaskState::Completed),
            metadata: None,
        });
        let (ct, body) = encode(ProtocolVersion::V1_0, item.clone());
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(ct, "application/a2a+json");
        assert_eq!(
            json["statusUpdate"]["status"]["state"],
            "TASK_STATE_COMPLETED"
        );
        let (ct, body) = encode(ProtocolVersion::V0_3, item);
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(ct, "application/json");
        assert_eq!(json["kind"], "status-update");
        assert_eq!(json["status"]["state"], "completed");
    }
}
