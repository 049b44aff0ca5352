//! The side channels of a turn's message: its sub-agents (`data-looopy-subagent`), its
//! artifacts (`file` parts linking the download route, `data-looopy-artifact` for data
//! records and datasets) and authorization requests (`data-looopy-auth`).

use looopy_protocol::event::{
    AuthRequired, DataWrite, DatasetWrite, FileEncoding, FileWrite, SubtaskCreated,
};
use looopy_protocol::{Event, TaskState};
use serde_json::{Map, Value, json};

use super::{Mapper, data};
use crate::ai_sdk::chunk::{Chunk, Part};

impl Mapper {
    pub(super) fn subtask_created(
        &mut self,
        event: &Event,
        subtask: &SubtaskCreated,
        out: &mut Vec<Chunk>,
    ) {
        let mut entry = Map::new();
        entry.insert("subtaskId".into(), json!(subtask.subtask_id));
        entry.insert("parentTaskId".into(), json!(event.task_id));
        entry.insert("prompt".into(), json!(subtask.prompt));
        if let Some(agent) = &subtask.agent_id {
            entry.insert("agentId".into(), json!(agent));
        }
        if let Some(call) = &subtask.tool_call_id {
            entry.insert("toolCallId".into(), json!(call));
        }
        entry.insert("state".into(), json!(TaskState::Submitted));
        self.subagents.insert(subtask.subtask_id.clone(), entry);
        self.emit_subagent(&subtask.subtask_id, out);
    }

    pub(super) fn update_subagent(
        &mut self,
        task_id: &str,
        key: &str,
        value: Value,
        out: &mut Vec<Chunk>,
    ) {
        if let Some(entry) = self.subagents.get_mut(task_id) {
            if entry.get(key) == Some(&value) {
                return;
            }
            entry.insert(key.into(), value);
            self.emit_subagent(task_id, out);
        }
    }

    pub(super) fn emit_subagent(&self, task_id: &str, out: &mut Vec<Chunk>) {
        if let Some(entry) = self.subagents.get(task_id) {
            out.push(data(
                "data-looopy-subagent",
                task_id,
                Value::Object(entry.clone()),
            ));
        }
    }

    pub(super) fn artifact_url(&self, task_id: &str, artifact_id: &str) -> String {
        format!(
            "{}/v1/tasks/{task_id}/artifacts/{artifact_id}",
            self.base_url
        )
    }

    /// A file artifact becomes a `file` part once its last chunk is logged, linking the
    /// download route (the content is not repeated in the stream).
    pub(super) fn file(&mut self, event: &Event, file: &FileWrite, out: &mut Vec<Chunk>) {
        if file.index == 0 || !self.files.contains_key(&file.artifact_id) {
            let media = file.mime_type.clone().unwrap_or_else(|| {
                match file.encoding {
                    Some(FileEncoding::Base64) => "application/octet-stream",
                    _ => "text/plain",
                }
                .to_string()
            });
            self.files.insert(file.artifact_id.clone(), media);
        }
        if file.complete {
            let media_type = self
                .files
                .remove(&file.artifact_id)
                .unwrap_or_else(|| "application/octet-stream".into());
            out.push(
                Part::File {
                    url: self.artifact_url(&event.task_id, &file.artifact_id),
                    media_type,
                }
                .into(),
            );
        }
    }

    pub(super) fn data_write(&mut self, event: &Event, write: &DataWrite, out: &mut Vec<Chunk>) {
        out.push(data(
            "data-looopy-artifact",
            &write.artifact_id,
            json!({
                "artifactId": write.artifact_id,
                "taskId": event.task_id,
                "kind": "data",
                "name": write.name,
                "description": write.description,
                "data": write.data,
                "url": self.artifact_url(&event.task_id, &write.artifact_id),
            }),
        ));
    }

    /// A dataset is announced as it grows (row count, completeness, the download link),
    /// not row by row: its rows are at the download route.
    pub(super) fn dataset(&mut self, event: &Event, write: &DatasetWrite, out: &mut Vec<Chunk>) {
        let rows = self
            .dataset_rows
            .entry(write.artifact_id.clone())
            .or_insert(0);
        *rows += write.rows.len() as u64;
        out.push(data(
            "data-looopy-artifact",
            &write.artifact_id,
            json!({
                "artifactId": write.artifact_id,
                "taskId": event.task_id,
                "kind": "dataset",
                "name": write.name,
                "rows": *rows,
                "complete": write.complete,
                "url": self.artifact_url(&event.task_id, &write.artifact_id),
            }),
        ));
    }

    pub(super) fn auth_required(
        &mut self,
        event: &Event,
        auth: &AuthRequired,
        out: &mut Vec<Chunk>,
    ) {
        let mut body = serde_json::to_value(auth).unwrap_or(Value::Null);
        if let Some(fields) = body.as_object_mut() {
            fields.insert("taskId".into(), json!(event.task_id));
            fields.insert("state".into(), json!("required"));
        }
        out.push(data("data-looopy-auth", &auth.auth_id, body));
    }
}
