//! The per-principal limit on concurrent event streams: each open stream holds a
//! [`StreamPermit`]; dropping the stream (client gone, stream ended) returns it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Counts open streams per principal.
#[derive(Debug)]
pub(crate) struct StreamLimiter {
    max: usize,
    open: Mutex<HashMap<Arc<str>, usize>>,
}

/// One open stream of one principal; releases its slot when dropped.
#[derive(Debug)]
pub struct StreamPermit {
    limiter: Arc<StreamLimiter>,
    key: Arc<str>,
}

impl StreamLimiter {
    pub(crate) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            open: Mutex::new(HashMap::new()),
        })
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }

    /// A permit, or `None` when `key` already holds the maximum.
    pub(crate) fn try_acquire(self: &Arc<Self>, key: Arc<str>) -> Option<StreamPermit> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = open.entry(Arc::clone(&key)).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(StreamPermit {
            limiter: Arc::clone(self),
            key,
        })
    }

    /// Streams `key` holds open now.
    #[cfg(test)]
    pub(crate) fn open_count(&self, key: &str) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.get(key).copied().unwrap_or(0)
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self
            .limiter
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permits_are_counted_per_principal_and_returned_on_drop() {
        let limiter = StreamLimiter::new(2);
        let a: Arc<str> = Arc::from("a");
        let p1 = limiter.try_acquire(a.clone()).unwrap();
        let p2 = limiter.try_acquire(a.clone()).unwrap();
        assert!(limiter.try_acquire(a.clone()).is_none());
        assert!(limiter.try_acquire(Arc::from("b")).is_some());
        drop(p1);
        assert_eq!(limiter.open_count("a"), 1);
        let _p3 = limiter.try_acquire(a.clone()).unwrap();
        drop(p2);
        drop(_p3);
        assert_eq!(limiter.open_count("a"), 0);
        assert!(limiter.open.lock().unwrap().is_empty());
    }
}
