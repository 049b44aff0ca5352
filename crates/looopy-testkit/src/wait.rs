//! Bounded waits: every wait in a test has an upper bound, so a bug fails the test with a
//! message instead of hanging the suite. The bound is generous (a loaded CI machine), never
//! an assertion about speed.

use std::future::Future;
use std::time::Duration;

/// Upper bound for any single wait.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `f`'s output, or a panic naming `what` after [`PATIENCE`].
pub async fn within<T>(what: &str, f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(PATIENCE, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: {what}"),
    }
}

/// Polls `check` every 25 ms until it returns `Some`, failing after [`PATIENCE`].
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    within(what, async {
        loop {
            if let Some(v) = check().await {
                return v;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    })
    .await
}

/// Runs the future `make` returns on a runtime of its own (two workers, in a thread of its
/// own), then shuts that runtime down: whatever the future left running there is dropped
/// with it and none of its ending code runs, as when a process dies. Returns the future's
/// output. (Waits at most 5 s for blocking work the runtime still runs.)
pub fn run_then_crash<F>(make: impl FnOnce() -> F + Send + 'static) -> F::Output
where
    F: Future,
    F::Output: Send + 'static,
{
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let output = runtime.block_on(make());
        runtime.shutdown_timeout(Duration::from_secs(5));
        output
    })
    .join()
    .unwrap()
}
