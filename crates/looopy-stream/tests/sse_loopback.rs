//! The decoder fed by a real TCP connection on loopback: a server thread writes an HTTP
//! `text/event-stream` response in many small writes (splitting lines, CRLFs and multi-byte
//! characters wherever they fall), the client feeds whatever each `read` returns.

use looopy_stream::sse::{SseDecoder, SseEvent};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::thread;

/// Serves one connection: HTTP headers, then `body` in writes of the given sizes (cycled),
/// then closes the connection.
fn serve_once(body: Vec<u8>, write_sizes: Vec<usize>) -> (String, thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind: {e}"));
    let address = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("addr: {e}"))
        .to_string();
    let handle = thread::spawn(move || {
        let (mut socket, _) = listener.accept().unwrap_or_else(|e| panic!("accept: {e}"));
        socket.set_nodelay(true).ok();
        let mut request = [0u8; 1024];
        let _ = socket.read(&mut request);
        let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
                    Connection: close\r\n\r\n";
        socket
            .write_all(head.as_bytes())
            .unwrap_or_else(|e| panic!("write: {e}"));
        let mut rest = body.as_slice();
        for size in write_sizes.iter().cycle() {
            if rest.is_empty() {
                break;
            }
            let (piece, tail) = rest.split_at((*size).clamp(1, rest.len()));
            if socket.write_all(piece).is_err() {
                return;
            }
            socket.flush().ok();
            rest = tail;
        }
        socket.shutdown(Shutdown::Both).ok();
    });
    (address, handle)
}

/// Connects, skips the HTTP head, and decodes the body as it arrives; returns the events and
/// how many reads fed the decoder.
fn fetch(address: &str) -> (Vec<SseEvent>, usize, String) {
    let mut socket = TcpStream::connect(address).unwrap_or_else(|e| panic!("connect: {e}"));
    socket
        .write_all(b"GET /events HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\n\r\n")
        .unwrap_or_else(|e| panic!("request: {e}"));
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut head = Vec::new();
    let mut in_body = false;
    let mut reads = 0;
    let mut buffer = [0u8; 97];
    loop {
        let read = socket.read(&mut buffer).unwrap_or(0);
        if read == 0 {
            break;
        }
        let mut bytes = &buffer[..read];
        if !in_body {
            head.extend_from_slice(bytes);
            let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") else {
                continue;
            };
            let body_start = end + 4;
            let body = head.split_off(body_start);
            in_body = true;
            reads += 1;
            decoder.push_into(&body, &mut events);
            bytes = &[];
        }
        if !bytes.is_empty() {
            reads += 1;
            decoder.push_into(bytes, &mut events);
        }
    }
    events.extend(decoder.finish());
    (events, reads, decoder.last_event_id().to_owned())
}

fn event(event: &str, data: &str, id: &str) -> SseEvent {
    SseEvent {
        event: event.into(),
        data: data.into(),
        id: id.into(),
    }
}

#[test]
fn events_arrive_intact_over_tcp_in_tiny_writes() {
    let body = "\u{FEFF}retry: 3000\r\n: keep-alive\r\n\r\nid: 1\r\nevent: delta\r\ndata: héllo\r\n\r\n\
                id: 2\rdata: 世界 🦀\rdata: second line\r\rid: 3\ndata: {\"done\":true}\n\n";
    let (address, server) = serve_once(body.as_bytes().to_vec(), vec![1, 2, 3, 5, 7]);
    let (events, reads, last_id) = fetch(&address);
    server.join().ok();
    assert_eq!(
        events,
        [
            event("delta", "héllo", "1"),
            event("message", "世界 🦀\nsecond line", "2"),
            event("message", "{\"done\":true}", "3"),
        ]
    );
    assert_eq!(last_id, "3");
    assert!(
        reads > 1,
        "the body must really arrive in pieces ({reads} reads)"
    );
}

#[test]
fn a_connection_dying_mid_event_discards_only_that_event() {
    let body = b"id: 7\ndata: complete\n\nid: 8\ndata: cut off mid-ev".to_vec();
    let (address, server) = serve_once(body, vec![4]);
    let (events, _, last_id) = fetch(&address);
    server.join().ok();
    assert_eq!(events, [event("message", "complete", "7")]);
    assert_eq!(
        last_id, "7",
        "a reconnect resumes after the last complete event"
    );
}

#[test]
fn a_large_stream_over_tcp_decodes_every_event() {
    let mut body = String::new();
    for n in 0..2000 {
        body.push_str(&format!(
            "id: {n}\ndata: {{\"choices\":[{{\"delta\":{{\"content\":\"token {n} ünïcödé\"}}}}]}}\n\n"
        ));
    }
    let (address, server) = serve_once(body.into_bytes(), vec![13, 64, 1, 1500]);
    let (events, _, last_id) = fetch(&address);
    server.join().ok();
    assert_eq!(events.len(), 2000);
    assert!(
        events
            .iter()
            .enumerate()
            .all(|(n, e)| e.id == n.to_string() && e.data.contains(&format!("token {n} ünïcödé")))
    );
    assert_eq!(last_id, "1999");
}
