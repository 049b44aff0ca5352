//! The bus over NATS JetStream: rings go to a memory stream, one subject per context
//! (`{prefix}.events.{context}`), and each replica reads it through an ordered consumer
//! that starts at new messages; control messages use core NATS request/reply on
//! `{prefix}.control.{replica}`, so the sender knows the owner heard it.

use std::time::Duration;

use async_nats::jetstream::{self, consumer::DeliverPolicy, consumer::push, stream};
use futures::StreamExt;
use tokio::sync::{broadcast, mpsc};
use tokio::task::JoinHandle;

use super::{BusOptions, Control, Ring};
use crate::StoreError;

/// How long a ring is kept in the stream: long enough for a consumer that reconnects.
const KEEP: Duration = Duration::from_secs(120);

pub(super) struct Nats {
    client: async_nats::Client,
    prefix: String,
    timeout: Duration,
}

fn bus_error(what: &str, error: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable {
        reason: format!("NATS {what}: {error}"),
    }
}

/// A subject token for any id: bytes other than `[A-Za-z0-9_-]` become `=XX` (hex), so
/// dots, wildcards and spaces in ids cannot change the subject's shape.
pub(super) fn token(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("={byte:02X}"));
        }
    }
    if out.is_empty() {
        out.push_str("=00");
    }
    out
}

impl Nats {
    pub(super) async fn start(
        url: &str,
        options: &BusOptions,
        replica: &str,
        heard: mpsc::Sender<Ring>,
        mut rings: mpsc::Receiver<Ring>,
        controls: broadcast::Sender<Control>,
    ) -> Result<(Nats, Vec<JoinHandle<()>>), StoreError> {
        let prefix = token(&options.prefix);
        let client = async_nats::ConnectOptions::new()
            .name(format!("looopy {replica}"))
            .connection_timeout(options.control_timeout.max(Duration::from_secs(2)))
            .connect(url)
            .await
            .map_err(|e| bus_error(&format!("connect to {url}"), e))?;
        let js = jetstream::new(client.clone());
        let events = format!("{prefix}.events.>");
        let stream = js
            .get_or_create_stream(stream::Config {
                name: format!("{}_EVENTS", prefix.to_uppercase().replace('-', "_")),
                subjects: vec![events.clone()],
                storage: stream::StorageType::Memory,
                max_age: KEEP,
                ..Default::default()
            })
            .await
            .map_err(|e| bus_error("stream", e))?;
        let consumer = stream
            .create_consumer(push::OrderedConfig {
                deliver_subject: client.new_inbox(),
                filter_subject: events,
                deliver_policy: DeliverPolicy::New,
                ..Default::default()
            })
            .await
            .map_err(|e| bus_error("consumer", e))?;
        let mut messages = consumer
            .messages()
            .await
            .map_err(|e| bus_error("consumer messages", e))?;
        let mut control_sub = client
            .subscribe(format!("{prefix}.control.{}", token(replica)))
            .await
            .map_err(|e| bus_error("control subscription", e))?;
        // The server has the subscriptions once the flush returns: a control message sent
        // right after start finds its responder.
        client.flush().await.map_err(|e| bus_error("flush", e))?;

        let me = replica.to_string();
        let receive = tokio::spawn(async move {
            while let Some(message) = messages.next().await {
                match message {
                    Ok(message) => match serde_json::from_slice::<Ring>(&message.payload) {
                        Ok(ring) if ring.r != me => {
                            if heard.try_send(ring).is_err() {
                                tracing::warn!("bus delivery queue full; a doorbell was dropped");
                            }
                        }
                        Ok(_) => {}
                        Err(error) => tracing::warn!(%error, "malformed ring on the bus"),
                    },
                    Err(error) => tracing::warn!(%error, "NATS consumer error"),
                }
            }
            tracing::warn!("NATS event consumer ended");
        });

        let publisher = {
            let js = js.clone();
            let prefix = prefix.clone();
            tokio::spawn(async move {
                while let Some(ring) = rings.recv().await {
                    let subject = format!("{prefix}.events.{}", token(&ring.c));
                    let Ok(payload) = serde_json::to_vec(&ring) else {
                        continue;
                    };
                    // The ack is not awaited: the log already has the events, and a lost
                    // ring is recovered from the log at the context's next one.
                    if let Err(error) = js.publish(subject, payload.into()).await {
                        tracing::warn!(%error, "could not publish a ring");
                    }
                }
            })
        };

        let answering = {
            let client = client.clone();
            tokio::spawn(async move {
                while let Some(message) = control_sub.next().await {
                    match serde_json::from_slice::<Control>(&message.payload) {
                        Ok(control) => {
                            let _ = controls.send(control);
                        }
                        Err(error) => tracing::warn!(%error, "malformed control message"),
                    }
                    if let Some(reply) = message.reply {
                        let _ = client.publish(reply, "ok".into()).await;
                    }
                }
            })
        };

        let nats = Nats {
            client,
            prefix,
            timeout: options.control_timeout,
        };
        Ok((nats, vec![receive, publisher, answering]))
    }

    pub(super) async fn send_control(&self, to: &str, control: &Control) -> Result<(), StoreError> {
        let payload: bytes::Bytes = serde_json::to_vec(control)
            .map_err(|e| StoreError::Invalid(e.to_string()))?
            .into();
        let subject = format!("{}.control.{}", self.prefix, token(to));
        let what = format!("control message to {to}");
        // Never handed to a disconnected client: it would keep the message and send it
        // after reconnecting, long after its sender gave up on it.
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Err(bus_error(&what, "not connected"));
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let sent = tokio::time::timeout_at(
                deadline,
                self.client.request(subject.clone(), payload.clone()),
            )
            .await;
            match sent {
                Ok(Ok(_)) => return Ok(()),
                // A replica that is just starting may not have subscribed yet: try again
                // until the deadline.
                Ok(Err(error))
                    if error.kind() == async_nats::client::RequestErrorKind::NoResponders
                        && tokio::time::Instant::now() + Duration::from_millis(50) < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Ok(Err(error)) => return Err(bus_error(&what, error)),
                Err(_) => return Err(bus_error(&what, "no answer in time")),
            }
        }
    }

    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        if self.client.connection_state() != async_nats::connection::State::Connected {
            return Err(bus_error("connection", "not connected"));
        }
        tokio::time::timeout(self.timeout, self.client.flush())
            .await
            .map_err(|_| bus_error("flush", "timed out"))?
            .map_err(|e| bus_error("flush", e))
    }
}

#[cfg(test)]
mod tests {
    use super::token;

    #[test]
    fn ids_become_single_subject_tokens() {
        assert_eq!(token("ctx-1_a"), "ctx-1_a");
        assert_eq!(token("a.b*c >"), "a=2Eb=2Ac=20=3E");
        assert_eq!(token(""), "=00");
        assert!(!token("ü.x").contains('.'));
    }
}
