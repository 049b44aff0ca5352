#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Event streams over real sockets: framing, whole turns, replay and resumption, slow
//! readers, internal events, failures and shutdown.

mod common;

use std::time::Duration;

use common::*;
use looopy_llm::scripted::{Matcher, Response, Script, ScriptedProvider, Turn};
use serde_json::{Value, json};

async fn post_sse(server: &TestServer, context: &str, message: &str) -> reqwest::Response {
    server
        .client
        .post(server.url(&format!("/v1/contexts/{context}/messages")))
        .header("accept", "text/event-stream")
        .json(&json!({"message": message}))
        .send()
        .await
        .unwrap()
}

#[tokio::test]
async fn frames_are_exactly_retry_then_id_event_data_with_lf_endings() {
    let server = TestServer::start(vec![Response::new().text("Hello there")]).await;
    let response = post_sse(&server, "ctx-frames", "hi").await;
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-cache");
    assert_eq!(headers["x-accel-buffering"], "no");
    let mut sse = SseClient::new(response);
    let events = sse.rest().await;
    // Rebuild the exact bytes from the decoded events: any deviation (CRLF, extra fields,
    // multi-line data, missing retry) makes them differ.
    let mut expected = b"retry: 3000\n\n".to_vec();
    for e in &events {
        expected.extend_from_slice(
            format!("id: {}\nevent: {}\ndata: {}\n\n", e.id, e.event, e.data).as_bytes(),
        );
    }
    assert_eq!(
        String::from_utf8_lossy(&sse.raw),
        String::from_utf8_lossy(&expected)
    );
    let first = data(&events[0]);
    assert!(
        sse.raw
            .starts_with(b"retry: 3000\n\nid: 1\nevent: task-created\ndata: {")
    );
    assert_eq!(
        (first["kind"].as_str(), first["seq"].as_u64()),
        (Some("task-created"), Some(1))
    );
    assert_eq!(first["contextId"], "ctx-frames");
    // The data carries kind, contextId and taskId; the SSE id is the seq.
    for e in &events {
        let d = data(e);
        assert_eq!(d["kind"], e.event.as_str());
        assert_eq!(d["seq"].as_u64().unwrap(), seq(e));
        assert!(d["taskId"].is_string());
    }
    server.shutdown().await;
}

#[tokio::test]
async fn post_with_accept_sse_streams_the_whole_turn_then_closes() {
    let server = TestServer::start(vec![
        Response::new().tool_call("calculator", json!({"expression": "6*7"})),
        Response::new().text("The answer is {{last_tool_result}}."),
    ])
    .await;
    let mut sse = SseClient::new(post_sse(&server, "ctx-calc", "What is 6*7?").await);
    let events = sse.rest().await; // returns only because the server closed the stream
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds.first(), Some(&"task-created"));
    assert_eq!(&kinds[kinds.len() - 2..], ["task-status", "task-complete"]);
    assert!(kinds.contains(&"tool-start") && kinds.contains(&"tool-complete"));
    assert!(
        kinds.iter().all(|k| !k.starts_with("internal:")),
        "{kinds:?}"
    );
    let seqs: Vec<u64> = events.iter().map(seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let complete = data(events.last().unwrap());
    assert_eq!(complete["status"], "completed");
    assert_eq!(complete["content"], "The answer is 42.");

    // The whole sequence, ids and times redacted.
    let all: Vec<Value> = events.iter().map(data).collect();
    insta::assert_json_snapshot!("calculator_turn_over_sse", all, {
        "[].taskId" => "[taskId]",
        "[].timestamp" => "[timestamp]",
        "[].metadata.duration" => "[ms]",
        "[].metadata.durationMs" => "[ms]",
    });
    server.shutdown().await;
}

#[tokio::test]
async fn a_reconnecting_client_resumes_with_no_gap_and_no_duplicate() {
    let text: String = (0..120).map(|i| format!("w{i} ")).collect();
    let server = TestServer::with_config(
        vec![Response::new().text_chunked(text.clone(), 3, 2)],
        |c| {
            c.allow_internal = true; // every seq is delivered, so the ids must be consecutive
        },
    )
    .await;
    let task = server.start_turn("ctx-resume", "go").await;
    let mut first = SseClient::new(server.events("ctx-resume", None, "").await);
    let mut seqs = Vec::new();
    for _ in 0..25 {
        seqs.push(seq(&first.next().await.unwrap()));
    }
    drop(first); // mid-turn disconnect; the turn goes on
    let last = seqs.last().unwrap().to_string();
    let mut second = SseClient::new(server.events("ctx-resume", Some(&last), "").await);
    loop {
        let e = second.next().await.unwrap();
        seqs.push(seq(&e));
        let d = data(&e);
        if e.event == "task-complete" && d["taskId"] == task.as_str() {
            break;
        }
    }
    let n = seqs.len() as u64;
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>());
    assert_eq!(
        server.wait_state(&task, "completed").await["result"],
        text.as_str()
    );
    server.shutdown().await;
}

#[tokio::test]
async fn last_event_id_may_come_from_the_query_and_the_header_wins() {
    let server = TestServer::start(vec![Response::new().text("abcdefghijkl")]).await;
    let task = server.start_turn("ctx-q", "go").await;
    server.wait_state(&task, "completed").await;
    let mut from_query = SseClient::new(server.events("ctx-q", None, "?lastEventId=3").await);
    let first = from_query.next().await.unwrap();
    assert!(seq(&first) > 3);
    let mut both = SseClient::new(server.events("ctx-q", Some("5"), "?lastEventId=2").await);
    assert!(seq(&both.next().await.unwrap()) > 5);
    // Every stored event after 3 that is not internal comes, in order.
    let log = server
        .state
        .store()
        .event_log()
        .read_after("ctx-q", 3, 1000)
        .await
        .unwrap();
    let expected: Vec<u64> = log
        .iter()
        .filter(|e| !e.is_internal())
        .map(|e| e.seq)
        .collect();
    let mut got = vec![seq(&first)];
    while got.len() < expected.len() {
        got.push(seq(&from_query.next().await.unwrap()));
    }
    assert_eq!(got, expected);
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_or_future_last_event_id_is_a_400_not_an_empty_stream() {
    let server = TestServer::start(vec![Response::new().text("ok")]).await;
    let task = server.start_turn("ctx-bad-id", "go").await;
    server.wait_state(&task, "completed").await;
    let last = server
        .state
        .store()
        .event_log()
        .last_seq("ctx-bad-id")
        .await
        .unwrap();
    for (header, query, code) in [
        (Some("abc"), "", "invalid_last_event_id"),
        (Some("-1"), "", "invalid_last_event_id"),
        (Some("1.5"), "", "invalid_last_event_id"),
        (None, "?lastEventId=x", "invalid_last_event_id"),
        (Some(&*format!("{}", last + 1)), "", "last_event_id_ahead"),
        (
            None,
            &*format!("?lastEventId={}", last + 100),
            "last_event_id_ahead",
        ),
    ] {
        let r = server.events("ctx-bad-id", header, query).await;
        assert_eq!(r.status(), 400, "{header:?} {query}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{header:?} {query}");
    }
    // The last id itself is fine: nothing to replay, the stream stays open.
    let r = server
        .events("ctx-bad-id", Some(&last.to_string()), "")
        .await;
    assert_eq!(r.status(), 200);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_is_disconnected_while_others_and_the_agent_carry_on() {
    // Big deltas at a pace a reading client follows easily; the turn would run for
    // minutes, and is canceled once the slow reader has been cut off.
    let flood = Response::new().text_chunked("y".repeat(4 * 1024 * 8000), 4 * 1024, 1);
    let script = Script::new().turn(
        Turn::new()
            .when(Matcher::any().user_contains("flood"))
            .response(flood),
    );
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::on_store(dir, ScriptedProvider::new(script), |c| {
        c.subscriber_buffer = 64;
    })
    .await;
    let hello = server.start_turn("ctx-slow", "hello").await; // echo turn creates the context
    server.wait_state(&hello, "completed").await;
    let start = server
        .state
        .store()
        .event_log()
        .last_seq("ctx-slow")
        .await
        .unwrap();

    let slow = server
        .events("ctx-slow", Some(&start.to_string()), "")
        .await; // not read for now
    let mut fast = SseClient::new(
        server
            .events("ctx-slow", Some(&start.to_string()), "")
            .await,
    );
    let flood_task = server.start_turn("ctx-slow", "flood").await;
    let fast_reader = tokio::spawn(async move {
        let mut seqs = Vec::new();
        loop {
            let Some(e) = fast.next().await else {
                return Err(seqs);
            };
            seqs.push(seq(&e));
            if e.event == "task-complete" {
                return Ok(seqs);
            }
        }
    });
    // Once the slow reader's socket and HTTP buffers are full, its 16-event buffer
    // buffer overflows and the router drops it; meanwhile the turn keeps producing.
    within("the slow reader being disconnected", async {
        while server.state.streams().router().stats().disconnected == 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(
        server.state.streams().router().stats().disconnected,
        1,
        "only the slow reader"
    );
    let r = server
        .client
        .post(server.url(&format!("/v1/tasks/{flood_task}/cancel")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let fast_seqs = within("the fast reader", fast_reader)
        .await
        .unwrap()
        .expect("the fast reader is never cut off");
    server.wait_state(&flood_task, "canceled").await;

    // The slow reader now reads what was buffered for it; its stream has ended.
    let mut slow = SseClient::new(slow);
    let mut slow_seqs: Vec<u64> = slow.rest().await.iter().map(seq).collect();
    assert!(
        slow_seqs.len() < fast_seqs.len(),
        "the slow reader was cut off early"
    );
    // Reconnecting with its last id serves everything else from the log.
    let resume = slow_seqs.last().copied().unwrap_or(start).to_string();
    let mut again = SseClient::new(server.events("ctx-slow", Some(&resume), "").await);
    while slow_seqs.len() < fast_seqs.len() {
        slow_seqs.push(seq(&again.next().await.unwrap()));
    }
    assert_eq!(slow_seqs, fast_seqs);
    server.shutdown().await;
}

#[tokio::test]
async fn internal_events_are_hidden_unless_the_server_allows_them() {
    let hidden = TestServer::start(vec![Response::new().text("hi")]).await;
    let kinds: Vec<String> = SseClient::new(post_sse(&hidden, "ctx-int", "go").await)
        .rest()
        .await
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(
        kinds.iter().all(|k| !k.starts_with("internal:")),
        "{kinds:?}"
    );
    let logged = hidden
        .state
        .store()
        .event_log()
        .read_after("ctx-int", 0, 100)
        .await
        .unwrap();
    assert!(
        logged.iter().any(|e| e.is_internal()),
        "the log has internal events to hide"
    );
    let r = hidden
        .events("ctx-int", None, "?kinds=internal:llm-call")
        .await;
    assert_eq!(r.status(), 400);
    hidden.shutdown().await;

    let shown = TestServer::with_config(vec![Response::new().text("hi")], |c| {
        c.allow_internal = true
    })
    .await;
    let kinds: Vec<String> = SseClient::new(post_sse(&shown, "ctx-int", "go").await)
        .rest()
        .await
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert!(kinds.iter().any(|k| k == "internal:llm-call"), "{kinds:?}");
    // Kind filter: only what was asked for, ids still the context's seq.
    let mut filtered = SseClient::new(
        shown
            .events("ctx-int", None, "?kinds=task-status,internal:llm-call")
            .await,
    );
    let mut got = Vec::new();
    while got.len() < 3 {
        got.push(filtered.next().await.unwrap());
    }
    assert!(
        got.iter()
            .all(|e| e.event == "task-status" || e.event == "internal:llm-call")
    );
    assert!(got.iter().all(|e| data(e)["seq"].as_u64() == Some(seq(e))));
    shown.shutdown().await;
}

#[tokio::test]
async fn a_turn_that_fails_at_once_sends_its_failure_and_closes() {
    let server = TestServer::start(vec![Response::new().fail("the model is down")]).await;
    let events = SseClient::new(post_sse(&server, "ctx-fail", "go").await)
        .rest()
        .await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        &kinds[kinds.len() - 2..],
        ["task-status", "task-complete"],
        "{kinds:?}"
    );
    let status = data(&events[events.len() - 2]);
    assert_eq!(status["status"], "failed");
    assert!(
        status["error"]["message"]
            .as_str()
            .unwrap()
            .contains("the model is down")
    );
    assert_eq!(data(events.last().unwrap())["status"], "failed");
    server.shutdown().await;
}

#[tokio::test]
async fn task_streams_filter_by_task_and_context_streams_see_every_task() {
    let server = TestServer::start(vec![Response::new().text("one two three")]).await;
    let a = server.start_turn("ctx-tasks", "first").await;
    server.wait_state(&a, "completed").await;
    let b = server.start_turn("ctx-tasks", "second").await;
    server.wait_state(&b, "completed").await;
    let mut only_b = SseClient::new(
        server
            .events("ctx-tasks", None, &format!("?taskId={b}"))
            .await,
    );
    let e = only_b.next().await.unwrap();
    assert_eq!(data(&e)["taskId"], b.as_str());
    assert_eq!(e.event, "task-created");
    let mut all = SseClient::new(server.events("ctx-tasks", None, "").await);
    assert_eq!(data(&all.next().await.unwrap())["taskId"], a.as_str());
    let r = server
        .events("ctx-tasks", None, "?taskId=task-unknown")
        .await;
    assert_eq!(r.status(), 404);
    server.shutdown().await;
}

#[tokio::test]
async fn graceful_shutdown_ends_open_streams() {
    let server = TestServer::start(vec![Response::new().text("hi")]).await;
    let task = server.start_turn("ctx-shut", "go").await;
    server.wait_state(&task, "completed").await;
    let mut open = SseClient::new(server.events("ctx-shut", None, "").await);
    let last = server
        .state
        .store()
        .event_log()
        .last_seq("ctx-shut")
        .await
        .unwrap();
    let mut n = 0;
    while n < last {
        n = seq(&open.next().await.unwrap());
    }
    let reading = tokio::spawn(async move { open.rest().await });
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.shutdown().await; // returns only once every connection is closed
    let tail = within("the stream ending", reading).await.unwrap();
    assert!(tail.is_empty(), "nothing after shutdown: {tail:?}");
}

#[tokio::test]
async fn idle_streams_get_keep_alive_comments() {
    let server = TestServer::with_config(vec![Response::new().text("hi")], |c| {
        c.keepalive = Duration::from_millis(50);
    })
    .await;
    let task = server.start_turn("ctx-keepalive", "go").await;
    server.wait_state(&task, "completed").await;
    let last = server
        .state
        .store()
        .event_log()
        .last_seq("ctx-keepalive")
        .await
        .unwrap();
    let mut response = server
        .events("ctx-keepalive", Some(&last.to_string()), "")
        .await;
    let mut raw = Vec::new();
    while raw
        .windows(2 * 14)
        .all(|w| w != b": keep-alive\n\n: keep-alive\n\n")
    {
        let chunk = within("keep-alive comments", response.chunk())
            .await
            .unwrap()
            .unwrap();
        raw.extend_from_slice(&chunk);
    }
    // Caught up, so nothing but the retry hint and comments: no event was replayed.
    let text = String::from_utf8(raw).unwrap();
    assert!(
        text.starts_with("retry: 3000\n\n: keep-alive\n\n"),
        "{text:?}"
    );
    assert!(!text.contains("data:"));
    server.shutdown().await;
}
