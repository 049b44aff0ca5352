//! Ctrl+C for the commands that follow a turn (`run`, `resume`, `chat`, and the same
//! through a server).

/// Ctrl+C presses, none lost: a `ctrl_c()` future made afresh on each turn of the loop
/// misses a press that lands while an event is being rendered, whereas a signal stream
/// keeps it until it is polled.
pub(crate) struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    pub(crate) async fn next(&mut self) {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            if signal.recv().await.is_some() {
                return;
            }
            // The signal driver is gone: never a stream of instant "presses".
            self.signal = None;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
