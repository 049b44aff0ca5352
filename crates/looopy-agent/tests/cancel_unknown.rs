//! A cancel of a paused task whose write fails (soak anomaly M/N): the database refused or
//! lost the write after the cancel began, so whether it happened is unknown. The caller
//! hears `OutcomeUnknown` (504 `outcome_unknown`, naming the task) — never a refusal — and
//! the cancel is held and written once, when the store takes writes again. The fault is a
//! real one on the real PostgreSQL: a trigger that refuses the cancel's events. Skips
//! without PostgreSQL unless `LOOOPY_REQUIRE_E2E=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use looopy_agent::{AgentConfig, AgentError};
use looopy_llm::scripted::Response;
use looopy_protocol::{EventPayload, TaskState};
use looopy_store::{Store, StoreOptions};
use looopy_testkit::services::TestSchema;
use serde_json::json;

use common::{agent_with, assert_well_formed, events, scripted, wait_for};

const CONTEXT: &str = "c-cancel-unknown";

const REFUSE_CANCELS: &str = "
    CREATE FUNCTION refuse_cancel() RETURNS trigger AS $$
    BEGIN RAISE EXCEPTION 'injected fault: the disk is gone'; END $$ LANGUAGE plpgsql;
    CREATE TRIGGER refuse_cancel BEFORE INSERT ON event_log FOR EACH ROW
        WHEN (NEW.data LIKE '%\"canceled\"%') EXECUTE FUNCTION refuse_cancel();
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_that_cannot_be_written_is_outcome_unknown_then_written_once() {
    let Some(schema) = TestSchema::create("cancel_unknown").await else {
        return;
    };
    let mut options = StoreOptions::default();
    options.pg_schema = Some(schema.name().to_string());
    options.replica_id = "replica-a".into();
    let store = Store::connect_with(&schema.url(), options).await.unwrap();
    let agent = agent_with(
        store.clone(),
        scripted(vec![
            Response::new().tool_call("ask_user", json!({"question": "Which city?"})),
        ]),
        AgentConfig::default(),
    );
    let turn = agent
        .start_turn(CONTEXT, "plan a trip", None)
        .await
        .unwrap();
    let task_id = turn.task_id.clone();
    assert_eq!(turn.wait().await.unwrap(), TaskState::WaitingInput);

    schema.execute(REFUSE_CANCELS).await;
    match agent.cancel(&task_id).await {
        Err(error @ AgentError::OutcomeUnknown { .. }) => {
            assert_eq!(error.http_status(), 504);
            assert_eq!(error.code(), "outcome_unknown");
            assert!(
                error.to_string().contains(&task_id),
                "names the task: {error}"
            );
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    // The log has no ending (its record may already say `canceled`: the record is
    // written before the log's closing events, which the fault refused).
    store.event_log().flush().await.ok();
    assert!(
        !events(&store, CONTEXT)
            .await
            .iter()
            .any(|e| e.task_id == task_id && matches!(e.payload, EventPayload::TaskComplete(_))),
        "the refused cancel is not in the log"
    );

    // The store takes the cancel again: the held cancel is written by the probe.
    schema
        .execute("DROP TRIGGER refuse_cancel ON event_log")
        .await;
    let after = store.event_log().last_seq(CONTEXT).await.unwrap();
    wait_for(&store, CONTEXT, after, |e| {
        e.task_id == task_id && matches!(e.payload, EventPayload::TaskComplete(_))
    })
    .await;
    // The record follows the log (written right after it).
    let canceled = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let record = store.get_task(&task_id).await.unwrap().unwrap();
            if record.state.is_terminal() {
                return record.state;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the record follows the logged cancel");
    assert_eq!(canceled, TaskState::Canceled);
    store.event_log().flush().await.unwrap();
    let log = events(&store, CONTEXT).await;
    let endings: Vec<_> = log
        .iter()
        .filter(|e| e.task_id == task_id)
        .filter_map(|e| match &e.payload {
            EventPayload::TaskStatus(s) if s.status.is_terminal() => Some(s.status),
            _ => None,
        })
        .collect();
    assert_eq!(endings, vec![TaskState::Canceled], "one ending, canceled");
    assert_well_formed(&log);
}
