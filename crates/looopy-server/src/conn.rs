//! Connections the server can close on its own initiative.
//!
//! A client that stops reading leaves its response stuck in a full socket buffer: hyper
//! stops polling the body, so the stream can never notice it should end. To disconnect
//! such a client (after it overflowed its event buffer, or when a graceful shutdown runs
//! out of patience) every accepted socket is wrapped in a [`KillableIo`] whose reads and
//! writes fail once its [`ConnHandle`] is closed; hyper then drops the connection.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Accepts TCP connections as [`KillableIo`]s, all children of one "close everything" token.
pub(crate) struct KillableListener {
    inner: TcpListener,
    close_all: CancellationToken,
}

impl KillableListener {
    pub(crate) fn new(inner: TcpListener, close_all: CancellationToken) -> Self {
        Self { inner, close_all }
    }
}

impl KillableListener {
    /// The next connection; accept errors are logged and retried (after a pause when
    /// out of file descriptors or similar), never returned.
    pub(crate) async fn accept(&mut self) -> (KillableIo, SocketAddr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    // Events are small and latency matters more than packet count.
                    if let Err(error) = stream.set_nodelay(true) {
                        tracing::debug!(%error, "could not set TCP_NODELAY");
                    }
                    return (KillableIo::new(stream, self.close_all.child_token()), addr);
                }
                Err(error) => {
                    // Out of file descriptors or similar: back off instead of spinning.
                    if !matches!(
                        error.kind(),
                        io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
                    ) {
                        tracing::error!(%error, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        }
    }
}

/// A TCP stream whose I/O fails once its token is cancelled.
pub(crate) struct KillableIo {
    inner: TcpStream,
    kill: CancellationToken,
    /// Bytes handed to the socket: tells a slow reader from one that stopped reading.
    written: Arc<AtomicU64>,
    /// Created on the first `Pending`, so an idle connection is woken when it is killed.
    waiter: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl KillableIo {
    fn new(inner: TcpStream, kill: CancellationToken) -> Self {
        Self {
            inner,
            kill,
            written: Arc::default(),
            waiter: None,
        }
    }

    /// Registers for wake-up on kill and reports whether it happened.
    fn poll_killed(&mut self, cx: &mut Context<'_>) -> bool {
        let kill = &self.kill;
        let waiter = self
            .waiter
            .get_or_insert_with(|| Box::pin(kill.clone().cancelled_owned()));
        waiter.as_mut().poll(cx).is_ready()
    }

    /// The handle that closes this connection.
    pub(crate) fn handle(&self, remote_addr: SocketAddr) -> ConnHandle {
        ConnHandle {
            remote_addr,
            kill: self.kill.clone(),
            written: Arc::clone(&self.written),
        }
    }

    fn count(&self, written: Poll<io::Result<usize>>) -> Poll<io::Result<usize>> {
        if let Poll::Ready(Ok(n)) = &written {
            self.written.fetch_add(*n as u64, Ordering::Relaxed);
        }
        written
    }

    fn killed_error() -> io::Error {
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            "connection closed by the server",
        )
    }

    /// Runs one I/O poll, failing it if the connection was killed before or while waiting.
    fn guard<T>(
        &mut self,
        cx: &mut Context<'_>,
        op: impl FnOnce(Pin<&mut TcpStream>, &mut Context<'_>) -> Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        if self.kill.is_cancelled() {
            return Poll::Ready(Err(Self::killed_error()));
        }
        match op(Pin::new(&mut self.inner), cx) {
            Poll::Pending if self.poll_killed(cx) => Poll::Ready(Err(Self::killed_error())),
            other => other,
        }
    }
}

impl AsyncRead for KillableIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        self.get_mut().guard(cx, |io, cx| io.poll_read(cx, buf))
    }
}

impl AsyncWrite for KillableIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = this.guard(cx, |io, cx| io.poll_write(cx, buf));
        this.count(written)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let written = this.guard(cx, |io, cx| io.poll_write_vectored(cx, bufs));
        this.count(written)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().guard(cx, |io, cx| io.poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Shutting down a killed connection is exactly what we want: let it through.
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The connection a request arrived on; lets a handler (or the event router) close it.
/// Available to handlers as `ConnectInfo<ConnHandle>` when the server was started with
/// [`bind`](crate::bind)/[`serve`](crate::serve).
#[derive(Debug, Clone)]
pub struct ConnHandle {
    remote_addr: SocketAddr,
    kill: CancellationToken,
    written: Arc<AtomicU64>,
}

impl ConnHandle {
    /// The peer's address.
    pub fn remote_addr(&self) -> SocketAddr {
        self.remote_addr
    }

    /// Closes the connection at once: pending and future reads and writes fail.
    pub fn close(&self) {
        self.kill.cancel();
    }

    /// Whether [`close`](Self::close) was called (or the server closed every connection).
    pub fn is_closed(&self) -> bool {
        self.kill.is_cancelled()
    }

    /// Bytes written to the socket so far (responses of every request on it).
    pub fn bytes_written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn a_killed_connection_fails_pending_reads_and_closes_for_the_peer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let close_all = CancellationToken::new();
        let mut listener = KillableListener::new(listener, close_all.clone());
        let mut client = TcpStream::connect(addr).await.unwrap();
        let (mut io, _) = listener.accept().await;
        let kill = io.kill.clone();

        let (first_read, got_first) = tokio::sync::oneshot::channel();
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 8];
            let n = io.read(&mut buf).await.unwrap();
            assert_eq!(&buf[..n], b"hi");
            first_read.send(()).unwrap();
            let err = io.read(&mut buf).await.unwrap_err(); // blocks until killed
            assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
            assert!(io.write_all(b"x").await.is_err());
        });
        client.write_all(b"hi").await.unwrap();
        got_first.await.unwrap();
        close_all.cancel(); // closing everything reaches each connection
        reader.await.unwrap();
        assert!(kill.is_cancelled());
        let mut rest = Vec::new();
        assert_eq!(client.read_to_end(&mut rest).await.unwrap_or(0), 0);
    }
}
