//! The stdio transport of `looopy mcp`: the SDK's newline-delimited JSON transport, plus an
//! answer for a line too long to read.
//!
//! The SDK drops a line over [`MAX_LINE_BYTES`] (it must: buffering it whole is how a
//! client could exhaust our memory) and answers nothing, so a client that sent a huge
//! request would wait for an answer forever. [`guarded`] watches the same bytes on their
//! way in (keeping only the first [`ID_PREFIX_BYTES`] of each line) and, when a line passes
//! the limit, answers it with a JSON-RPC error (`-32600`, "message too large") carrying the
//! request's `id` when the start of the line shows it, and no `id` otherwise (as the SDK
//! answers a request it cannot read). The line itself is still dropped by the SDK, which
//! goes on with the next one.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use rmcp::RoleServer;
use rmcp::model::{ErrorData, RequestId, ServerJsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::{AsyncRwTransport, DEFAULT_MAX_LINE_LENGTH};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::mpsc;

/// The longest line (one message, its newline included) `looopy mcp` reads: the SDK's
/// default, the same as its streamable-HTTP client accepts in one event.
pub const MAX_LINE_BYTES: usize = DEFAULT_MAX_LINE_LENGTH;

/// How much of each line is kept to find the `id` of one that turns out too long.
const ID_PREFIX_BYTES: usize = 4096;

/// Refusals waiting to be written; more (16 MiB each) are only logged.
const PENDING_REFUSALS: usize = 64;

/// The SDK's line transport over `read`/`write`, answering lines over [`MAX_LINE_BYTES`].
pub(crate) fn guarded<R, W>(read: R, write: W) -> Guarded<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (oversized, refusals) = mpsc::channel(PENDING_REFUSALS);
    let watch = LineWatch {
        read,
        line_bytes: 0,
        prefix: Vec::new(),
        reported: false,
        oversized,
    };
    Guarded {
        inner: AsyncRwTransport::new(watch, write).with_max_line_length(MAX_LINE_BYTES),
        refusals,
    }
}

/// See [`guarded`].
pub(crate) struct Guarded<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    inner: AsyncRwTransport<RoleServer, LineWatch<R>, W>,
    /// The ids (when found) of lines that were too long, in order.
    refusals: mpsc::Receiver<Option<RequestId>>,
}

impl<R, W> Transport<RoleServer> for Guarded<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), io::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            // Both are cancel-safe: the SDK polls `receive` in a `select!` itself.
            tokio::select! {
                biased;
                Some(id) = self.refusals.recv() => self.refuse(id).await,
                message = self.inner.receive() => {
                    if message.is_none() {
                        // The input ended right after a long line: answer it all the same.
                        while let Ok(id) = self.refusals.try_recv() {
                            self.refuse(id).await;
                        }
                    }
                    return message;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), io::Error> {
        self.inner.close().await
    }
}

impl<R, W> Guarded<R, W>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    async fn refuse(&mut self, id: Option<RequestId>) {
        tracing::warn!(
            ?id,
            max_bytes = MAX_LINE_BYTES,
            "MCP message over the line limit; answered with an error"
        );
        if let Err(error) = self.inner.send(too_large(id)).await {
            tracing::warn!(%error, "could not answer a message over the line limit");
        }
    }
}

/// The answer to a line over the limit.
pub(crate) fn too_large(id: Option<RequestId>) -> ServerJsonRpcMessage {
    ServerJsonRpcMessage::error(
        ErrorData::invalid_request(
            format!(
                "message too large: one message (one line) may be at most {MAX_LINE_BYTES} bytes"
            ),
            Some(json!({"maxBytes": MAX_LINE_BYTES})),
        ),
        id,
    )
}

/// Passes the input through unchanged, measuring each line the way the SDK does (its
/// bytes, newline included) and reporting, once per line, one that passes the limit.
struct LineWatch<R> {
    read: R,
    /// Bytes of the current line so far.
    line_bytes: usize,
    /// Its first [`ID_PREFIX_BYTES`].
    prefix: Vec<u8>,
    /// Whether the current line was already reported.
    reported: bool,
    oversized: mpsc::Sender<Option<RequestId>>,
}

impl<R> LineWatch<R> {
    fn observe(&mut self, bytes: &[u8]) {
        for piece in bytes.split_inclusive(|b| *b == b'\n') {
            let room = ID_PREFIX_BYTES.saturating_sub(self.prefix.len());
            self.prefix
                .extend_from_slice(&piece[..room.min(piece.len())]);
            self.line_bytes = self.line_bytes.saturating_add(piece.len());
            if self.line_bytes > MAX_LINE_BYTES && !self.reported {
                self.reported = true;
                if self.oversized.try_send(request_id(&self.prefix)).is_err() {
                    tracing::warn!(
                        "too many MCP messages over the line limit; not answering this one"
                    );
                }
            }
            if piece.ends_with(b"\n") {
                self.line_bytes = 0;
                self.prefix.clear();
                self.reported = false;
            }
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineWatch<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.read).poll_read(cx, buf))?;
        this.observe(&buf.filled()[before..]);
        Poll::Ready(Ok(()))
    }
}

/// The `id` of a JSON-RPC request from the start of its line: the top-level members are
/// read in order until `id`; `None` when a value before it (a huge `params`) does not end
/// within `prefix`, or the line is not a JSON object.
pub(crate) fn request_id(prefix: &[u8]) -> Option<RequestId> {
    let rest = prefix.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(prefix);
    let mut rest = skip_whitespace(rest).strip_prefix(b"{")?;
    loop {
        let (key, used) = one_value::<String>(skip_whitespace(rest))?;
        rest = skip_whitespace(&skip_whitespace(rest)[used..]).strip_prefix(b":")?;
        rest = skip_whitespace(rest);
        if key == "id" {
            return one_value::<RequestId>(rest).map(|(id, _)| id);
        }
        let (_, used) = one_value::<IgnoredAny>(rest)?;
        rest = skip_whitespace(&rest[used..]).strip_prefix(b",")?;
    }
}

/// One JSON value at the start of `bytes` and how many bytes it took — only when
/// something follows it (a number at the very end of a prefix may be cut short).
fn one_value<T: DeserializeOwned>(bytes: &[u8]) -> Option<(T, usize)> {
    let mut values = serde_json::Deserializer::from_slice(bytes).into_iter::<T>();
    let value = values.next()?.ok()?;
    let used = values.byte_offset();
    (used < bytes.len()).then_some((value, used))
}

fn skip_whitespace(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> Option<RequestId> {
        request_id(text.as_bytes())
    }

    #[test]
    fn the_id_is_found_before_a_value_that_does_not_end() {
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"x":"aaaa"#),
            Some(RequestId::Number(42))
        );
        assert_eq!(
            id(r#" { "id" : "req-7" , "params": ["#),
            Some(RequestId::String("req-7".into()))
        );
        assert_eq!(
            id("\u{feff}{\"method\":\"x\",\"id\":3,"),
            Some(RequestId::Number(3))
        );
    }

    #[test]
    fn no_id_when_it_is_not_in_the_prefix_or_not_an_id() {
        assert_eq!(id(r#"{"jsonrpc":"2.0","params":{"x":"aaaa"#), None);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":null,"params":"#), None);
        assert_eq!(id(r#"{"id":{"a":1},"params":"#), None);
        assert_eq!(id(r#"[1,2,3"#), None);
        assert_eq!(id("garbage"), None);
        assert_eq!(id(""), None);
        // A number cut at the end of the prefix could be another number.
        assert_eq!(id(r#"{"id":12"#), None);
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_reported_once_and_the_next_is_not() {
        let (tx, mut rx) = mpsc::channel(4);
        let mut watch = LineWatch {
            read: tokio::io::empty(),
            line_bytes: 0,
            prefix: Vec::new(),
            reported: false,
            oversized: tx,
        };
        watch.observe(br#"{"jsonrpc":"2.0","id":9,"params":""#);
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..17 {
            watch.observe(&chunk);
        }
        watch.observe(b"\"}\n{\"id\":10}\n");
        assert_eq!(rx.try_recv().ok(), Some(Some(RequestId::Number(9))));
        assert!(
            rx.try_recv().is_err(),
            "reported once, the short line not at all"
        );
        // Exactly at the limit (newline included) is fine.
        let mut line = vec![b'a'; MAX_LINE_BYTES - 1];
        line.push(b'\n');
        watch.observe(&line);
        assert!(rx.try_recv().is_err());
    }
}
