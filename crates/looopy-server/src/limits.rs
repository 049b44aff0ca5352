//! Limits on concurrent event streams: each open stream holds a [`StreamPermit`];
//! dropping the stream (client gone, stream ended) returns it.
//!
//! Three limits apply together:
//! - an authenticated **principal** holds at most `max_streams_per_principal` streams;
//! - an **anonymous** caller (no tokens configured) holds at most `max_streams_per_client`
//!   streams per client address. Anonymous callers are all the same principal, so a
//!   per-principal pool would let one client (64 idle `curl -N`) lock everybody out of the
//!   web page; counting by address confines a greedy client to its own slots;
//! - the whole server holds at most `max_streams` streams, sized from the measured memory
//!   per idle stream (10,000 idle streams < 200 MB, `BENCHMARKS.md`), so no mix of
//!   clients can exhaust memory or file descriptors.
//!
//! Addresses are the TCP peer address, never a forwarded-for header (which any client can
//! forge). IPv6 clients are counted per /64 prefix, since one host commonly holds a whole
//! /64; IPv4-mapped IPv6 addresses count as their IPv4 address.

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, Ipv6Addr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use tokio::time::Sleep;

use looopy_a2a::HostError;

use crate::ApiError;
use crate::auth::Principal;

/// The configured limits (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamLimits {
    pub per_principal: usize,
    pub per_client: usize,
    pub total: usize,
}

/// Whose slots a stream takes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum StreamOwner {
    /// An authenticated principal, by id.
    Principal(Arc<str>),
    /// An anonymous caller, by (normalised) client address.
    Client(IpAddr),
    /// An anonymous caller whose address is unknown (the router served without
    /// [`bind`](crate::bind), as in in-process tests): one shared per-client pool.
    UnknownClient,
}

impl StreamOwner {
    /// The owner of a stream opened by `principal` from `client`.
    pub(crate) fn of(principal: &Principal, client: Option<IpAddr>) -> Self {
        match (principal.id(), client) {
            (Some(id), _) => Self::Principal(Arc::from(id)),
            (None, Some(addr)) => Self::Client(client_key(addr)),
            (None, None) => Self::UnknownClient,
        }
    }
}

/// `addr` as counted: IPv4 as is (also when IPv4-mapped), IPv6 by its /64 prefix.
fn client_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}

/// Why a stream was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The principal holds its maximum.
    Principal(usize),
    /// The anonymous client address holds its maximum.
    Client(usize),
    /// The server holds its maximum.
    Server(usize),
}

impl From<Refusal> for HostError {
    /// Too many streams (429) when the caller holds too many (its own doing: close one),
    /// server busy (503) when the server is full (nobody's fault: come back later).
    fn from(refusal: Refusal) -> Self {
        match refusal {
            Refusal::Principal(limit) => HostError::TooManyStreams(format!(
                "at most {limit} event streams may be open at once per principal"
            )),
            Refusal::Client(limit) => HostError::TooManyStreams(format!(
                "at most {limit} event streams may be open at once per client address \
                 without a token; close one first"
            )),
            Refusal::Server(limit) => HostError::ServerBusy(format!(
                "the server holds its maximum of {limit} event streams; retry later"
            )),
        }
    }
}

impl From<Refusal> for ApiError {
    fn from(refusal: Refusal) -> Self {
        HostError::from(refusal).into()
    }
}

#[derive(Debug, Default)]
struct Counts {
    by_owner: HashMap<StreamOwner, usize>,
    total: usize,
}

/// Counts open streams per owner and in total.
#[derive(Debug)]
pub(crate) struct StreamLimiter {
    limits: StreamLimits,
    open: Mutex<Counts>,
}

/// One open stream; releases its slots when dropped.
#[derive(Debug)]
pub struct StreamPermit {
    limiter: Arc<StreamLimiter>,
    owner: StreamOwner,
}

impl StreamLimiter {
    pub(crate) fn new(limits: StreamLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            open: Mutex::new(Counts::default()),
        })
    }

    /// A permit, or why not. The owner's limit is checked first, so a client at its own
    /// limit hears that (429) rather than "server busy".
    pub(crate) fn try_acquire(
        self: &Arc<Self>,
        owner: StreamOwner,
    ) -> Result<StreamPermit, Refusal> {
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let held = open.by_owner.get(&owner).copied().unwrap_or(0);
        let refusal = match owner {
            StreamOwner::Principal(_) => Refusal::Principal(self.limits.per_principal),
            StreamOwner::Client(_) | StreamOwner::UnknownClient => {
                Refusal::Client(self.limits.per_client)
            }
        };
        let limit = match refusal {
            Refusal::Principal(limit) | Refusal::Client(limit) | Refusal::Server(limit) => limit,
        };
        if held >= limit {
            tracing::debug!(?owner, held, "stream refused: per-caller limit");
            return Err(refusal);
        }
        if open.total >= self.limits.total {
            tracing::warn!(
                total = open.total,
                "stream refused: the server holds its maximum of event streams"
            );
            return Err(Refusal::Server(self.limits.total));
        }
        *open.by_owner.entry(owner.clone()).or_insert(0) += 1;
        open.total += 1;
        Ok(StreamPermit {
            limiter: Arc::clone(self),
            owner,
        })
    }

    /// Streams `owner` holds open now.
    #[cfg(test)]
    pub(crate) fn open_count(&self, owner: &StreamOwner) -> usize {
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        open.by_owner.get(owner).copied().unwrap_or(0)
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut open = self
            .limiter
            .open
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        open.total = open.total.saturating_sub(1);
        if let Some(count) = open.by_owner.get_mut(&self.owner) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.by_owner.remove(&self.owner);
            }
        }
    }
}

/// The comment that ends a stream at its maximum lifetime.
pub(crate) const LIFETIME_REACHED: &str =
    "stream lifetime reached; reconnect with Last-Event-ID to resume";

/// SSE frames that end after a maximum lifetime (`max_stream_lifetime`), with a comment
/// saying so. Frames are whole, so the cut never falls inside an event; dropping the inner
/// stream returns its permit. Without a lifetime, the frames pass through untouched.
pub(crate) struct LifetimeLimited<S> {
    frames: S,
    deadline: Option<Pin<Box<Sleep>>>,
    done: bool,
}

impl<S> LifetimeLimited<S> {
    /// Must be created inside a tokio runtime when `lifetime` is set (the deadline timer).
    pub(crate) fn new(frames: S, lifetime: Option<Duration>) -> Self {
        Self {
            frames,
            deadline: lifetime.map(|d| Box::pin(tokio::time::sleep(d))),
            done: false,
        }
    }
}

impl<S: Stream<Item = Bytes> + Unpin> Stream for LifetimeLimited<S> {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(deadline) = &mut this.deadline {
            if deadline.as_mut().poll(cx).is_ready() {
                this.done = true;
                return Poll::Ready(Some(crate::sse::encode_comment(LIFETIME_REACHED)));
            }
        }
        let next = Pin::new(&mut this.frames).poll_next(cx);
        if matches!(next, Poll::Ready(None)) {
            this.done = true;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_principal: usize, per_client: usize, total: usize) -> Arc<StreamLimiter> {
        StreamLimiter::new(StreamLimits {
            per_principal,
            per_client,
            total,
        })
    }

    fn principal(id: &str) -> StreamOwner {
        StreamOwner::Principal(Arc::from(id))
    }

    fn client(addr: &str) -> StreamOwner {
        StreamOwner::of(&Principal::anonymous(), Some(addr.parse().unwrap()))
    }

    #[test]
    fn permits_are_counted_per_principal_and_returned_on_drop() {
        let limiter = limiter(2, 1, 100);
        let a = principal("a");
        let p1 = limiter.try_acquire(a.clone()).unwrap();
        let p2 = limiter.try_acquire(a.clone()).unwrap();
        assert_eq!(
            limiter.try_acquire(a.clone()).unwrap_err(),
            Refusal::Principal(2)
        );
        assert!(limiter.try_acquire(principal("b")).is_ok());
        drop(p1);
        assert_eq!(limiter.open_count(&a), 1);
        let p3 = limiter.try_acquire(a.clone()).unwrap();
        drop(p2);
        drop(p3);
        assert_eq!(limiter.open_count(&a), 0);
        let open = limiter.open.lock().unwrap();
        assert!(open.by_owner.is_empty() && open.total == 0);
    }

    #[test]
    fn anonymous_callers_are_limited_per_address_not_together() {
        let limiter = limiter(64, 2, 100);
        let _a1 = limiter.try_acquire(client("127.0.0.1")).unwrap();
        let _a2 = limiter.try_acquire(client("127.0.0.1")).unwrap();
        assert_eq!(
            limiter.try_acquire(client("127.0.0.1")).unwrap_err(),
            Refusal::Client(2)
        );
        // Another address, and the same address seen as IPv4-mapped IPv6.
        assert!(limiter.try_acquire(client("127.0.0.2")).is_ok());
        assert!(limiter.try_acquire(client("::ffff:127.0.0.1")).is_err());
        // One IPv6 host's /64 counts once.
        let _b1 = limiter.try_acquire(client("2001:db8::1")).unwrap();
        let _b2 = limiter.try_acquire(client("2001:db8::ffff:2")).unwrap();
        assert!(limiter.try_acquire(client("2001:db8::3")).is_err());
        assert!(limiter.try_acquire(client("2001:db8:0:1::1")).is_ok());
        let error = ApiError::from(Refusal::Client(2));
        assert_eq!(
            (error.status().as_u16(), error.code()),
            (429, "too_many_streams")
        );
    }

    #[test]
    fn the_server_total_caps_everyone() {
        let limiter = limiter(10, 10, 3);
        let held: Vec<_> = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
            .into_iter()
            .map(|a| limiter.try_acquire(client(a)).unwrap())
            .collect();
        assert_eq!(
            limiter.try_acquire(client("10.0.0.4")).unwrap_err(),
            Refusal::Server(3)
        );
        assert_eq!(
            limiter.try_acquire(principal("p")).unwrap_err(),
            Refusal::Server(3)
        );
        drop(held);
        assert!(limiter.try_acquire(principal("p")).is_ok());
        let error = ApiError::from(Refusal::Server(3));
        assert_eq!(
            (error.status().as_u16(), error.code()),
            (503, "server_busy")
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_past_its_lifetime_ends_with_a_comment() {
        use futures::StreamExt;
        // Two frames, then silence forever, as an idle event stream.
        let frames =
            futures::stream::iter([Bytes::from_static(b"one"), Bytes::from_static(b"two")])
                .chain(futures::stream::pending())
                .boxed();
        let limited = LifetimeLimited::new(frames, Some(Duration::from_millis(50)));
        let out: Vec<Bytes> = limited.collect().await;
        let comment = format!(": {LIFETIME_REACHED}\n\n");
        assert_eq!(
            out,
            [
                Bytes::from_static(b"one"),
                Bytes::from_static(b"two"),
                Bytes::from(comment)
            ]
        );

        // No lifetime: the frames and their end pass through.
        let frames = futures::stream::iter([Bytes::from_static(b"a")]);
        let out: Vec<Bytes> = LifetimeLimited::new(frames, None).collect().await;
        assert_eq!(out, [Bytes::from_static(b"a")]);
    }
}
