//! A client that sends its next message the moment it has read the previous turn's last
//! event is not refused: the run may still hold its context for an instant (its final
//! events are broadcast when they commit, the claim goes when the run returns), and the
//! server waits for the agent's release notification instead of answering 409.

mod common;

use common::*;
use looopy_llm::scripted::Response;

const TURNS: usize = 25;

#[tokio::test]
async fn the_next_message_right_after_the_final_event_starts_a_turn() {
    let responses = (0..TURNS).map(|i| Response::new().text(format!("answer {i}")));
    let server = TestServer::start(responses.collect()).await;
    for i in 0..TURNS {
        let response = server
            .client
            .post(server.url("/v1/contexts/ctx-b2b/messages"))
            .header("accept", "text/event-stream")
            .json(&serde_json::json!({"message": format!("question {i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "turn {i} was refused");
        // Read up to the final event only: the next message goes out as soon as it is
        // seen, not after the response has ended.
        let mut sse = SseClient::new(response);
        let last = loop {
            let event = data(&sse.next().await.expect("the stream ended early"));
            if event["kind"] == "task-complete" {
                break event;
            }
        };
        assert_eq!(last["status"], "completed", "turn {i}");
    }
    server.shutdown().await;
}
