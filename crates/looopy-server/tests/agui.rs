//! AG-UI over a real server and socket: a calculator turn's mapped events (snapshot), a
//! reconnect after every frame of a run (gapless, with the join prelude), cancel versus
//! disconnect, a failing model as `RUN_ERROR`, and the sub-agent's events attributed. The
//! interrupt and bad-input cases are in `agui_interrupts.rs`; the official client in
//! `agui_client.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod agui_support;

use agui_support::{
    Frame, assert_balanced, assert_no_nulls, frames, frames_until, input, post, run,
};
use looopy_testkit::sse::SseClient;
use serde_json::Value;

/// One line per event, ids and timestamps left out, consecutive `*_CONTENT` of one
/// message folded into one line: the shape of a run, stable across runs.
fn shape(frames: &[Frame], task: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut folding: Option<(String, String)> = None;
    for frame in frames {
        let e = &frame.event;
        let kind = frame.kind().to_string();
        if kind.ends_with("_CONTENT") {
            let delta = e["delta"].as_str().unwrap_or_default();
            if let Some((k, text)) = &mut folding {
                if *k == kind {
                    text.push_str(delta);
                    continue;
                }
            }
            if let Some((k, text)) = folding.take() {
                lines.push(format!("{k} {text:?}"));
            }
            folding = Some((kind, delta.to_string()));
            continue;
        }
        if let Some((k, text)) = folding.take() {
            lines.push(format!("{k} {text:?}"));
        }
        let mut rest = e.as_object().unwrap().clone();
        for key in ["type", "timestamp", "threadId", "runId"] {
            rest.remove(key);
        }
        let text = Value::Object(rest).to_string().replace(task, "TASK");
        lines.push(format!("{kind} {text}"));
    }
    if let Some((k, text)) = folding {
        lines.push(format!("{k} {text:?}"));
    }
    lines
}

fn task_of(frames: &[Frame]) -> String {
    frames[0].event["metadata"]["looopy"]["taskId"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test]
async fn a_calculator_turn_maps_to_the_whole_agui_taxonomy() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let frames = run(&server, "thread-calc", "run-1", "What is 6*7?").await;
    assert_balanced(&frames);
    for frame in &frames {
        assert_no_nulls(&frame.event);
        assert!(frame.event["timestamp"].is_i64(), "{frame:?}");
        assert!(!frame.id.is_empty());
    }
    let first = &frames[0].event;
    assert_eq!(first["threadId"], "thread-calc");
    assert_eq!(first["runId"], "run-1");
    let done = &frames.last().unwrap().event;
    assert_eq!(done["type"], "RUN_FINISHED");
    assert_eq!(done["outcome"]["type"], "success");
    assert_eq!(done["usage"][0]["totalTokens"], 90);
    // Frame ids follow the log: never decreasing, `N.k` before the last frame of event N.
    let seqs: Vec<u64> = frames
        .iter()
        .map(|f| f.id.split('.').next().unwrap().parse().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    let task = task_of(&frames);
    insta::assert_snapshot!(shape(&frames, &task).join("\n"));

    // The same conversation, as Looopy stores it: one user message, the AG-UI id kept.
    let history: Value = server
        .client
        .get(server.url("/v1/contexts/thread-calc/messages"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let users: Vec<&Value> = history["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .collect();
    assert_eq!(users.len(), 1, "{history}");
    assert_eq!(users[0]["id"], "u-run-1");
    server.shutdown().await;
}

#[tokio::test]
async fn a_reconnect_after_any_frame_is_gapless_with_a_join_prelude() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let all = run(&server, "thread-re", "run-re", "What is 6*7?").await;
    let task = task_of(&all);
    // The whole run again, from the log: identical.
    let url = server.url("/v1/agui/thread-re/runs/run-re");
    let again = frames(server.client.get(&url).send().await.unwrap()).await;
    assert_eq!(again, all);
    // By the task id too (durable: what survives a restart for a new turn's run).
    let by_task = server.url(&format!("/v1/agui/thread-re/runs/{task}"));
    let again = frames(server.client.get(&by_task).send().await.unwrap()).await;
    assert_eq!(again.len(), all.len());

    for cut in 0..all.len() - 1 {
        let resumed = frames(
            server
                .client
                .get(&url)
                .header("last-event-id", &all[cut].id)
                .send()
                .await
                .unwrap(),
        )
        .await;
        // The prelude (RUN_STARTED and the openers of what was open, with the cursor's id),
        // then exactly the frames after the cut.
        let rest = &all[cut + 1..];
        let prelude_len = resumed.len() - rest.len();
        assert_eq!(&resumed[prelude_len..], rest, "cut after frame {cut}");
        let prelude = &resumed[..prelude_len];
        assert_eq!(prelude[0].event, all[0].event);
        for frame in prelude {
            assert_eq!(frame.id, all[cut].id);
            assert!(
                all[..=cut].iter().any(|f| f.event == frame.event),
                "a prelude event the run never sent: {frame:?}"
            );
        }
        assert_balanced(&resumed);
    }
    // `?after=` is the same as Last-Event-ID; after the end there is nothing to resume.
    let cut = all.len() / 2;
    let by_query = frames(
        server
            .client
            .get(format!("{url}?after={}", all[cut].id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(by_query.last(), all.last());
    let after_end = frames(
        server
            .client
            .get(format!("{url}?after={}", all.last().unwrap().id))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert!(after_end.is_empty(), "{after_end:?}");
    for (bad, code) in [("x", 400), ("1.2.3", 400), ("999999", 400)] {
        let answer = server
            .client
            .get(format!("{url}?after={bad}"))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), code, "{bad}");
    }
    let unknown = server
        .client
        .get(server.url("/v1/agui/thread-re/runs/no-such-run"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    server.shutdown().await;
}

#[tokio::test]
async fn a_disconnect_does_not_stop_the_run_and_cancel_does() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    // Disconnect: the client leaves after the first text; the run goes on to the end.
    let mut sse =
        SseClient::new(post(&server, &input("thread-dc", "run-dc", "slow please"), None).await);
    let seen = frames_until(&mut sse, "TEXT_MESSAGE_CONTENT").await;
    let task = task_of(&seen);
    drop(sse);
    server.wait_state(&task, "completed").await;
    let replay = frames(
        server
            .client
            .get(server.url("/v1/agui/thread-dc/runs/run-dc"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replay.last().unwrap().event["outcome"]["type"], "success");
    assert_eq!(replay[..seen.len()], seen[..]);

    // Cancel: the run's own stream ends with the cancelled outcome.
    let mut sse =
        SseClient::new(post(&server, &input("thread-dc", "run-stop", "slow again"), None).await);
    frames_until(&mut sse, "TEXT_MESSAGE_CONTENT").await;
    let cancelled = server
        .client
        .post(server.url("/v1/agui/thread-dc/runs/run-stop/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 202);
    let mut rest = Vec::new();
    while let Some(e) = sse.next().await {
        rest.push(serde_json::from_str::<Value>(&e.data).unwrap());
    }
    let last = rest.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(last["outcome"]["type"], "cancelled");
    let unknown = server
        .client
        .post(server.url("/v1/agui/thread-dc/runs/nope/cancel"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    server.shutdown().await;
}

#[tokio::test]
async fn a_failing_model_is_a_run_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let frames = run(&server, "thread-fail", "run-fail", "fail now").await;
    assert_balanced(&frames);
    let last = &frames.last().unwrap().event;
    assert_eq!(last["type"], "RUN_ERROR", "{frames:#?}");
    assert!(
        last["message"].as_str().unwrap().contains("unavailable"),
        "{last}"
    );
    assert!(last["code"].is_string());
    server.shutdown().await;
}

#[tokio::test]
async fn a_research_run_attributes_the_sub_agents_events() {
    let dir = tempfile::tempdir().unwrap();
    let server = agui_support::server_on(dir.path(), |_| {}).await;
    let frames = run(&server, "thread-research", "run-r", "research tea").await;
    assert_balanced(&frames);
    let started = frames
        .iter()
        .find(|f| f.kind() == "SUBAGENT_STARTED")
        .expect("a SUBAGENT_STARTED");
    let sub = started.event["subagentRunId"].as_str().unwrap();
    assert_eq!(started.event["name"], "researcher");
    let parent_call = started.event["parentToolCallId"].as_str().unwrap();
    assert!(frames.iter().any(|f| f.kind() == "TOOL_CALL_START"
        && f.event["toolCallId"] == parent_call
        && f.event["toolCallName"] == "researcher"
        && f.event.get("subagentRunId").is_none()));
    // The researcher's own tool call and text are attributed to it.
    let own: Vec<&str> = frames
        .iter()
        .filter(|f| f.event["subagentRunId"] == sub)
        .map(Frame::kind)
        .collect();
    for kind in [
        "TOOL_CALL_START",
        "TOOL_CALL_RESULT",
        "TEXT_MESSAGE_CONTENT",
        "STEP_STARTED",
    ] {
        assert!(own.contains(&kind), "{kind} not attributed: {own:?}");
    }
    let finished = frames
        .iter()
        .find(|f| f.kind() == "SUBAGENT_FINISHED")
        .unwrap();
    assert_eq!(finished.event["subagentRunId"], sub);
    assert_eq!(finished.event["outcome"]["type"], "success");
    assert_eq!(frames.last().unwrap().event["outcome"]["type"], "success");
    server.shutdown().await;
}
