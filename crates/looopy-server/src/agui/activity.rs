//! Artifacts as AG-UI activities. AG-UI has no artifact event; an `ACTIVITY_SNAPSHOT`
//! (a message of role `activity` that a UI renders as its own widget) fits best: one
//! activity message per artifact (`messageId` `artifact:{artifactId}`, `activityType`
//! `looopy-artifact`), snapshotted when the artifact starts and again when it is complete.
//! File bytes are not copied into the stream: the activity links the download route.

use looopy_protocol::{Event, EventPayload};
use serde_json::{Map, Value};

use super::mapping::AguiEvent;

/// The activity snapshot of an artifact event, or `None` for the chunks in between.
pub(crate) fn artifact(event: &Event, subagent: Option<&str>) -> Option<AguiEvent> {
    let mut content = Map::new();
    let (artifact_id, kind, name, description, complete) = match &event.payload {
        EventPayload::FileWrite(file) => {
            if file.index != 0 && !file.complete {
                return None;
            }
            if let Some(mime) = &file.mime_type {
                content.insert("mimeType".into(), Value::from(mime.clone()));
            }
            (
                &file.artifact_id,
                "file",
                &file.name,
                &file.description,
                file.complete,
            )
        }
        EventPayload::DataWrite(data) => {
            content.insert("data".into(), data.data.clone());
            (
                &data.artifact_id,
                "data",
                &data.name,
                &data.description,
                true,
            )
        }
        EventPayload::DatasetWrite(set) => {
            if set.index != 0 && !set.complete {
                return None;
            }
            (
                &set.artifact_id,
                "dataset",
                &set.name,
                &set.description,
                set.complete,
            )
        }
        _ => return None,
    };
    content.insert("artifactId".into(), Value::from(artifact_id.clone()));
    content.insert("kind".into(), Value::from(kind));
    content.insert("taskId".into(), Value::from(event.task_id.clone()));
    content.insert("complete".into(), Value::from(complete));
    content.insert(
        "url".into(),
        Value::from(format!(
            "/v1/tasks/{}/artifacts/{}",
            event.task_id, artifact_id
        )),
    );
    if let Some(name) = name {
        content.insert("name".into(), Value::from(name.clone()));
    }
    if let Some(description) = description {
        content.insert("description".into(), Value::from(description.clone()));
    }
    let mut snapshot = Map::new();
    snapshot.insert("type".into(), Value::from("ACTIVITY_SNAPSHOT"));
    snapshot.insert(
        "timestamp".into(),
        Value::from(event.timestamp.timestamp_millis()),
    );
    if let Some(subagent) = subagent {
        snapshot.insert("subagentRunId".into(), Value::from(subagent));
    }
    snapshot.insert(
        "messageId".into(),
        Value::from(format!("artifact:{artifact_id}")),
    );
    snapshot.insert("activityType".into(), Value::from("looopy-artifact"));
    snapshot.insert("content".into(), Value::Object(content));
    snapshot.insert("replace".into(), Value::from(true));
    Some(snapshot)
}
