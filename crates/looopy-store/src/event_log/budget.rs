//! The queue's byte budget: how much room an event takes while it waits to be committed.

use looopy_protocol::Event;
use tokio::sync::Semaphore;

/// Permits of the queue's byte budget: one per KiB, so that a budget of any useful size
/// fits a `u32` request.
pub(super) fn budget_permits(queue_bytes: usize) -> u32 {
    u32::try_from(queue_bytes / 1024)
        .unwrap_or(u32::MAX)
        .clamp(1, u32::try_from(Semaphore::MAX_PERMITS).unwrap_or(u32::MAX))
}

/// An event's estimated size in budget permits (KiB, rounded up). The frequent events
/// (deltas, file chunks) are measured by their text without serializing; the rest are
/// rarer and counted as the JSON they become.
pub(crate) fn weight(event: &Event) -> u32 {
    use looopy_protocol::EventPayload as P;
    const ENVELOPE: usize = 256;
    let bulk = match &event.payload {
        P::FileWrite(w) => w.data.len(),
        P::ContentDelta(d) => d.delta.len(),
        P::ThoughtStream(t) => {
            t.delta.as_ref().map_or(0, String::len) + t.content.as_ref().map_or(0, String::len)
        }
        P::ContentComplete(c) => c.content.len(),
        other => {
            let mut counter = ByteCounter(0);
            match serde_json::to_writer(&mut counter, other) {
                Ok(()) => counter.0,
                Err(_) => 0,
            }
        }
    };
    u32::try_from(bulk.saturating_add(ENVELOPE).div_ceil(1024)).unwrap_or(u32::MAX)
}

/// A writer that only counts bytes.
struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 = self.0.saturating_add(buf.len());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
