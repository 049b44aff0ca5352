//! An SSE client for tests: reads a `reqwest` response body and decodes it with the
//! crate's own WHATWG decoder, keeping the raw bytes for assertions about the wire format.

use std::collections::VecDeque;

use futures::StreamExt;
use futures::stream::BoxStream;
use looopy_stream::sse::{SseDecoder, SseEvent};
use serde_json::Value;

use crate::wait::within;

/// Reads SSE events from a response body.
pub struct SseClient {
    body: BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    decoder: SseDecoder,
    pending: VecDeque<SseEvent>,
    /// Every byte received so far.
    pub raw: Vec<u8>,
}

impl SseClient {
    /// Asserts the response is a `200 text/event-stream` and starts reading it.
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "expected an event stream");
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        Self {
            body: response.bytes_stream().boxed(),
            decoder: SseDecoder::new(),
            pending: VecDeque::new(),
            raw: Vec::new(),
        }
    }

    /// The next event, `None` at the end of the stream (clean or broken).
    pub async fn next(&mut self) -> Option<SseEvent> {
        within("the next SSE event", async {
            loop {
                if let Some(e) = self.pending.pop_front() {
                    return Some(e);
                }
                match self.body.next().await {
                    Some(Ok(chunk)) => {
                        self.raw.extend_from_slice(&chunk);
                        self.pending.extend(self.decoder.push(&chunk));
                    }
                    Some(Err(_)) | None => return None,
                }
            }
        })
        .await
    }

    /// Every remaining event until the stream ends.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        let mut out = Vec::new();
        while let Some(e) = self.next().await {
            out.push(e);
        }
        out
    }
}

/// The event's `data:` as JSON.
pub fn data(e: &SseEvent) -> Value {
    serde_json::from_str(&e.data).unwrap()
}

/// The event's `id:` as a sequence number.
pub fn seq(e: &SseEvent) -> u64 {
    e.id.parse().unwrap()
}
