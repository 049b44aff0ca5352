//! Provider decode throughput: a loopback server streams 100,000 Chat Completions chunks
//! as fast as it can and the OpenAI provider turns them into events.
//!
//! `cargo bench -p looopy-llm --bench decode -- --measurement-time 3 --warm-up-time 1`
//! (throughput is reported in elements/s = chunks/s).

// A benchmark that cannot set up its loopback server has nothing to measure: failing loudly is right.
#![allow(clippy::expect_used, clippy::panic)]

use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use looopy_llm::openai::{OpenAiConfig, OpenAiProvider};
use looopy_llm::{ChatRequest, LlmEvent, Provider};
use looopy_protocol::Message;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const CHUNKS: u64 = 100_000;

/// A realistic stream: every chunk carries the fields OpenAI sends, one short token each.
fn stream_body() -> Vec<u8> {
    let mut body = Vec::with_capacity(CHUNKS as usize * 200);
    for i in 0..CHUNKS {
        body.extend_from_slice(
            format!(
                "data: {{\"id\":\"chatcmpl-bench\",\"object\":\"chat.completion.chunk\",\"created\":1731000000,\"model\":\"gpt-4o-mini\",\"system_fingerprint\":\"fp_bench\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" tok{i}\"}},\"logprobs\":null,\"finish_reason\":null}}],\"usage\":null}}\n\n"
            )
            .as_bytes(),
        );
    }
    body.extend_from_slice(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    body.extend_from_slice(b"data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":100000,\"total_tokens\":100010}}\n\n");
    body.extend_from_slice(b"data: [DONE]\n\n");
    body
}

/// Serves `body` (close-delimited) to every request, as fast as the socket takes it.
async fn serve(listener: TcpListener, body: &'static [u8]) {
    while let Ok((mut socket, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut request = Vec::new();
            let mut buf = [0u8; 8192];
            loop {
                let Ok(n) = socket.read(&mut buf).await else {
                    return;
                };
                if n == 0 {
                    return;
                }
                request.extend_from_slice(&buf[..n]);
                if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let head =
                b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
            if socket.write_all(head).await.is_err() {
                return;
            }
            for piece in body.chunks(64 * 1024) {
                if socket.write_all(piece).await.is_err() {
                    return;
                }
            }
            let _ = socket.shutdown().await;
        });
    }
}

async fn consume(provider: &OpenAiProvider) -> u64 {
    let request = ChatRequest {
        messages: vec![Message::user("go")],
        ..ChatRequest::default()
    };
    let mut stream = provider.stream(request);
    let mut deltas = 0;
    while let Some(item) = stream.next().await {
        match item {
            Ok(LlmEvent::TextDelta(_)) => deltas += 1,
            Ok(_) => {}
            Err(error) => panic!("bench stream failed: {error}"),
        }
    }
    deltas
}

fn decode(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let body: &'static [u8] = Box::leak(stream_body().into_boxed_slice());
    let listener = runtime
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    runtime.spawn(serve(listener, body));

    let mut group = c.benchmark_group("openai_decode");
    group.throughput(Throughput::Elements(CHUNKS));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for (name, thoughts) in [
        ("loopback_100k_chunks", true),
        ("loopback_100k_chunks_no_thought_split", false),
    ] {
        let config = OpenAiConfig::new(url.clone())
            .model("bench")
            .inline_thoughts(thoughts);
        let provider = OpenAiProvider::new(config).expect("provider");
        // Sanity check outside the measurement: every chunk became a text delta.
        assert!(runtime.block_on(consume(&provider)) >= CHUNKS / 2);
        group.bench_function(name, |b| b.iter(|| runtime.block_on(consume(&provider))));
    }
    group.finish();
}

criterion_group!(benches, decode);
criterion_main!(benches);
