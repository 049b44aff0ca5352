//! A tiny loopback HTTP/1.1 server for provider tests. It serves scripted replies as raw
//! bytes — split into chosen TCP writes, with pauses, cut mid-stream or held open — records
//! every request, and notes when the client closes its connection.
//!
//! Each connection serves one request (`Connection: close`); the n-th request gets the
//! n-th reply, and the last reply repeats.
// Test scaffolding: a failed unwrap here is a failed test, which is what we want.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod events;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One step of a reply body.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Written in one TCP write (one chunk when chunked).
    Bytes(Vec<u8>),
    /// Waits before the next part.
    Pause(Duration),
    /// Drops the connection at once (no chunked terminator: the body is incomplete).
    Cut,
    /// Stops writing and waits for the client to close the connection.
    Hold,
}

/// How the body's end is signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Transfer-Encoding: chunked` (what streaming servers send).
    Chunked,
    /// No length: the body ends when the server closes the connection.
    CloseDelimited,
    /// `Content-Length` (error replies).
    Length,
}

/// A scripted HTTP response.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub parts: Vec<Part>,
    pub framing: Framing,
    /// Pause between two `Bytes` parts, so the client reads them separately.
    pub pace: Duration,
}

impl Reply {
    /// `200` with an event-stream body sent in one write.
    pub fn sse(body: impl AsRef<[u8]>) -> Self {
        Self {
            status: 200,
            headers: vec![
                ("content-type".into(), "text/event-stream".into()),
                ("cache-control".into(), "no-cache".into()),
            ],
            parts: vec![Part::Bytes(body.as_ref().to_vec())],
            framing: Framing::Chunked,
            pace: Duration::ZERO,
        }
    }

    /// An error status with a body (JSON when it looks like JSON).
    pub fn status(status: u16, body: impl AsRef<[u8]>) -> Self {
        let body = body.as_ref().to_vec();
        let content_type = if body.first() == Some(&b'{') {
            "application/json"
        } else {
            "text/plain"
        };
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            parts: vec![Part::Bytes(body)],
            framing: Framing::Length,
            pace: Duration::ZERO,
        }
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers
            .push((name.to_ascii_lowercase(), value.to_string()));
        self
    }

    pub fn framing(mut self, framing: Framing) -> Self {
        self.framing = framing;
        self
    }

    pub fn pace(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }

    pub fn then(mut self, part: Part) -> Self {
        self.parts.push(part);
        self
    }

    pub fn then_bytes(self, bytes: impl AsRef<[u8]>) -> Self {
        self.then(Part::Bytes(bytes.as_ref().to_vec()))
    }

    /// All body bytes, in order.
    pub fn body(&self) -> Vec<u8> {
        self.parts
            .iter()
            .filter_map(|p| match p {
                Part::Bytes(b) => Some(b.as_slice()),
                _ => None,
            })
            .flatten()
            .copied()
            .collect()
    }

    /// Re-splits the body into writes ending at the given byte offsets (other parts dropped).
    pub fn split_at(mut self, offsets: &[usize]) -> Self {
        let body = self.body();
        let mut parts = Vec::new();
        let mut start = 0;
        for &end in offsets.iter().chain(std::iter::once(&body.len())) {
            let end = end.clamp(start, body.len());
            if end > start {
                parts.push(Part::Bytes(body[start..end].to_vec()));
            }
            start = end;
        }
        self.parts = parts;
        self
    }

    /// Re-splits the body into writes of pseudo-random sizes (1..=max_len) from `seed`.
    pub fn split_random(self, seed: u64, max_len: usize) -> Self {
        let len = self.body().len();
        let mut rng = SplitMix(seed);
        let mut offsets = Vec::new();
        let mut at = 0;
        while at < len {
            at += 1 + (rng.next() as usize) % max_len.max(1);
            offsets.push(at);
        }
        self.split_at(&offsets)
    }
}

/// A small deterministic generator, so split patterns are reproducible from their seed.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Header names lower-cased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

#[derive(Default)]
struct Shared {
    replies: Vec<Reply>,
    next: AtomicUsize,
    requests: Mutex<Vec<Recorded>>,
    /// Per connection (in accept order): whether the client closed it.
    closed: Mutex<Vec<bool>>,
}

/// The running server; stops when dropped.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl TestServer {
    /// Starts serving `replies` on a free loopback port.
    pub async fn start(replies: Vec<Reply>) -> Self {
        assert!(
            !replies.is_empty(),
            "a test server needs at least one reply"
        );
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().expect("local addr");
        let shared = Arc::new(Shared {
            replies,
            ..Shared::default()
        });
        let accept_shared = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let conn = {
                    let mut closed = accept_shared.closed.lock().unwrap();
                    closed.push(false);
                    closed.len() - 1
                };
                tokio::spawn(serve(socket, accept_shared.clone(), conn));
            }
        });
        Self { addr, shared, task }
    }

    /// `http://127.0.0.1:<port>` — append the API prefix the provider expects.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    pub fn request_count(&self) -> usize {
        self.shared.requests.lock().unwrap().len()
    }

    /// Whether the client closed connection number `conn` (0-based, accept order) within
    /// `within`. A bounded wait, not a timing assertion.
    pub async fn wait_for_close(&self, conn: usize, within: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if self
                .shared
                .closed
                .lock()
                .unwrap()
                .get(conn)
                .copied()
                .unwrap_or(false)
            {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(mut socket: TcpStream, shared: Arc<Shared>, conn: usize) {
    let _ = socket.set_nodelay(true);
    let Some(request) = read_request(&mut socket).await else {
        mark_closed(&shared, conn);
        return;
    };
    shared.requests.lock().unwrap().push(request);
    let n = shared.next.fetch_add(1, Ordering::SeqCst);
    let reply = shared.replies[n.min(shared.replies.len() - 1)].clone();
    if write_reply(&mut socket, &reply).await.is_err() {
        mark_closed(&shared, conn);
        return;
    }
    if reply.parts.last() == Some(&Part::Cut) {
        return;
    }
    // Wait for the client to close its side (EOF or reset), however the reply ended.
    let _ = socket.shutdown().await;
    let mut sink = [0u8; 1024];
    loop {
        match tokio::time::timeout(Duration::from_secs(30), socket.read(&mut sink)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(_)) => {}
            Err(_) => return,
        }
    }
    mark_closed(&shared, conn);
}

fn mark_closed(shared: &Shared, conn: usize) {
    if let Some(flag) = shared.closed.lock().unwrap().get_mut(conn) {
        *flag = true;
    }
}

/// Writes the head and the parts; stops early at `Cut` or `Hold`.
async fn write_reply(socket: &mut TcpStream, reply: &Reply) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    match reply.framing {
        Framing::Chunked => head.push_str("transfer-encoding: chunked\r\n"),
        Framing::Length => head.push_str(&format!("content-length: {}\r\n", reply.body().len())),
        Framing::CloseDelimited => {}
    }
    head.push_str("connection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    let mut first = true;
    for part in &reply.parts {
        match part {
            Part::Bytes(bytes) => {
                if !first && !reply.pace.is_zero() {
                    tokio::time::sleep(reply.pace).await;
                }
                first = false;
                if bytes.is_empty() {
                    continue;
                }
                let mut frame = Vec::with_capacity(bytes.len() + 16);
                if reply.framing == Framing::Chunked {
                    frame.extend_from_slice(format!("{:x}\r\n", bytes.len()).as_bytes());
                    frame.extend_from_slice(bytes);
                    frame.extend_from_slice(b"\r\n");
                } else {
                    frame.extend_from_slice(bytes);
                }
                socket.write_all(&frame).await?;
                socket.flush().await?;
            }
            Part::Pause(duration) => tokio::time::sleep(*duration).await,
            Part::Cut => return Ok(()),
            Part::Hold => {
                let mut sink = [0u8; 1024];
                loop {
                    match socket.read(&mut sink).await {
                        Ok(0) | Err(_) => return Err(std::io::ErrorKind::ConnectionAborted.into()),
                        Ok(_) => {}
                    }
                }
            }
        }
    }
    if reply.framing == Framing::Chunked {
        socket.write_all(b"0\r\n\r\n").await?;
        socket.flush().await?;
    }
    Ok(())
}

async fn read_request(socket: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        if buf.len() > 1 << 20 {
            return None;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}
