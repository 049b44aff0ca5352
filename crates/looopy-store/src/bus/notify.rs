//! The bus over PostgreSQL `LISTEN/NOTIFY`: one channel per store schema
//! (`looopy_bus_{schema}`), carrying rings and control messages as JSON. A listener keeps a
//! connection of its own (reconnecting when it drops); publishing is `pg_notify` on a
//! pooled connection. Notifications are delivered at commit, in commit order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use super::{Control, Ring};
use crate::StoreError;
use crate::postgres::PgBackend;

/// What travels on the channel.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "k")]
enum Message {
    #[serde(rename = "ring")]
    Ring(Ring),
    #[serde(rename = "control")]
    Control { to: String, control: Control },
}

pub(super) struct Notify {
    pg: Arc<PgBackend>,
    channel: String,
    listening: Arc<AtomicBool>,
}

impl Notify {
    pub(super) async fn start(
        pg: Arc<PgBackend>,
        replica: &str,
        heard: mpsc::Sender<Ring>,
        mut rings: mpsc::Receiver<Ring>,
        controls: broadcast::Sender<Control>,
    ) -> Result<(Notify, Vec<JoinHandle<()>>), StoreError> {
        let schema: String = pg
            .client()
            .await?
            .query_one("SELECT current_schema()", &[])
            .await?
            .try_get(0)?;
        let channel: String = format!("looopy_bus_{schema}").chars().take(63).collect();
        let listening = Arc::new(AtomicBool::new(false));
        // The first LISTEN happens before start returns, so nothing committed after is missed.
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let listener = tokio::spawn(listen(
            Arc::clone(&pg),
            channel.clone(),
            replica.to_string(),
            heard,
            controls,
            Arc::clone(&listening),
            ready_tx,
        ));
        match tokio::time::timeout(Duration::from_secs(10), ready_rx).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => {
                listener.abort();
                return Err(error);
            }
            _ => {
                listener.abort();
                return Err(StoreError::Unavailable {
                    reason: "LISTEN did not start in time".into(),
                });
            }
        }
        let publisher = {
            let pg = Arc::clone(&pg);
            let channel = channel.clone();
            tokio::spawn(async move {
                while let Some(ring) = rings.recv().await {
                    if let Err(error) = notify(&pg, &channel, &Message::Ring(ring)).await {
                        tracing::warn!(%error, "could not NOTIFY a ring");
                    }
                }
            })
        };
        Ok((
            Notify {
                pg,
                channel,
                listening,
            },
            vec![listener, publisher],
        ))
    }

    pub(super) async fn send_control(&self, to: &str, control: &Control) -> Result<(), StoreError> {
        let message = Message::Control {
            to: to.to_string(),
            control: control.clone(),
        };
        notify(&self.pg, &self.channel, &message).await
    }

    pub(super) fn ping(&self) -> Result<(), StoreError> {
        if self.listening.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(StoreError::Unavailable {
                reason: "the LISTEN connection is down".into(),
            })
        }
    }
}

async fn notify(pg: &PgBackend, channel: &str, message: &Message) -> Result<(), StoreError> {
    let payload = serde_json::to_string(message).map_err(|e| StoreError::Invalid(e.to_string()))?;
    let client = pg.client().await?;
    let statement = client.prepare_cached("SELECT pg_notify($1, $2)").await?;
    client.execute(&statement, &[&channel, &payload]).await?;
    Ok(())
}

/// Listens until aborted, reconnecting after a lost connection.
async fn listen(
    pg: Arc<PgBackend>,
    channel: String,
    replica: String,
    heard: mpsc::Sender<Ring>,
    controls: broadcast::Sender<Control>,
    listening: Arc<AtomicBool>,
    ready: tokio::sync::oneshot::Sender<Result<(), StoreError>>,
) {
    let mut ready = Some(ready);
    loop {
        let result = listen_once(
            &pg, &channel, &replica, &heard, &controls, &listening, &mut ready,
        )
        .await;
        listening.store(false, Ordering::Release);
        if let Some(ready) = ready.take() {
            let _ = ready.send(result);
            return;
        }
        if let Err(error) = result {
            tracing::warn!(%error, "LISTEN connection lost; reconnecting");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn listen_once(
    pg: &PgBackend,
    channel: &str,
    replica: &str,
    heard: &mpsc::Sender<Ring>,
    controls: &broadcast::Sender<Control>,
    listening: &AtomicBool,
    ready: &mut Option<tokio::sync::oneshot::Sender<Result<(), StoreError>>>,
) -> Result<(), StoreError> {
    let (client, mut connection) = pg.dedicated().await?;
    let (messages_tx, mut messages) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        let mut stream = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = stream.next().await {
            match message {
                Ok(message) => {
                    if messages_tx.send(message).is_err() {
                        break;
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "LISTEN connection failed");
                    break;
                }
            }
        }
    });
    let quoted = format!("\"{}\"", channel.replace('"', "\"\""));
    client.batch_execute(&format!("LISTEN {quoted}")).await?;
    listening.store(true, Ordering::Release);
    if let Some(ready) = ready.take() {
        let _ = ready.send(Ok(()));
    }
    while let Some(message) = messages.recv().await {
        let AsyncMessage::Notification(notification) = message else {
            continue;
        };
        match serde_json::from_str::<Message>(notification.payload()) {
            Ok(Message::Ring(ring)) if ring.r != replica => {
                if heard.try_send(ring).is_err() {
                    tracing::warn!("bus delivery queue full; a doorbell was dropped");
                }
            }
            Ok(Message::Control { to, control }) if to == replica => {
                let _ = controls.send(control);
            }
            Ok(_) => {}
            Err(error) => tracing::warn!(%error, "malformed bus notification"),
        }
    }
    driver.abort();
    drop(client);
    Err(StoreError::Unavailable {
        reason: "the LISTEN connection closed".into(),
    })
}
