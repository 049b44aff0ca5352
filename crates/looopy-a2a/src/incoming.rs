//! From an incoming A2A message to what the agent runs on: the user's text, any structured
//! data (e.g. the answer to an input request), and where it belongs.

use serde_json::Value;

use super::{A2aError, v1, v03};
use looopy_protocol::ids::is_valid_id;

/// A client's message, reduced to what the agent needs.
#[derive(Debug, Clone, PartialEq)]
pub struct UserInput {
    pub message_id: String,
    /// The conversation to continue, if the client named one.
    pub context_id: Option<String>,
    /// The task to continue (e.g. one waiting for input), if the client named one.
    pub task_id: Option<String>,
    /// The text parts, joined by `\n` (as the official SDKs join them).
    pub text: String,
    /// The data parts' values, in order.
    pub data: Vec<Value>,
    /// File parts (`raw` or `url`). Always empty today: files are refused while reading
    /// (see [`user_input_from_v1`]); kept for an agent that accepts them.
    pub files: Vec<v1::Part>,
    pub reference_task_ids: Vec<String>,
}

/// Reads a v1.0 message sent by a client. Every transport (JSON-RPC, REST, gRPC) reads
/// messages through here, so they refuse the same messages with the same errors.
///
/// Errors, in this order: an empty `messageId`; no `role` (`ROLE_UNSPECIFIED`, which is
/// how ProtoJSON reads an absent role) or a role other than user; an id (`messageId`,
/// `contextId`, `taskId`, an entry of `referenceTaskIds`) that is not a safe identifier
/// ([`is_valid_id`]: 1–128 characters of `A-Z a-z 0-9 . _ : -`); a file part (this agent takes text and data, so that is
/// [`A2aError::UnsupportedContent`] — checked before emptiness, so a message of only files
/// says why it is refused); a message with neither text nor data.
pub fn user_input_from_v1(message: &v1::Message) -> Result<UserInput, A2aError> {
    if message.message_id.is_empty() {
        return Err(A2aError::MissingMessageId);
    }
    match message.role {
        v1::Role::User => {}
        v1::Role::Unspecified => return Err(A2aError::MissingRole),
        v1::Role::Agent => return Err(A2aError::NotFromUser),
    }
    // The `messageId` is stored with the message and shown in `Task.history`, so it obeys
    // the rule the other ids obey: otherwise an id of megabytes (or with control
    // characters) would be stored and echoed, past `--max-message-bytes`.
    let ids = [
        ("messageId", message.message_id.as_str()),
        (
            "contextId",
            message.context_id.as_deref().unwrap_or_default(),
        ),
        ("taskId", message.task_id.as_deref().unwrap_or_default()),
    ];
    // An empty id is ProtoJSON's "unset" (an empty `messageId` was refused above); an
    // empty entry of a list is no id at all.
    let set = ids.into_iter().filter(|(_, id)| !id.is_empty());
    let references = message
        .reference_task_ids
        .iter()
        .map(|id| ("referenceTaskIds", id.as_str()));
    if let Some((field, id)) = set.chain(references).find(|(_, id)| !is_valid_id(id)) {
        return Err(A2aError::InvalidId {
            field,
            value: id.chars().take(64).collect(),
        });
    }
    let mut texts = Vec::new();
    let mut data = Vec::new();
    let mut files = Vec::new();
    for part in &message.parts {
        match &part.content {
            v1::PartContent::Text(t) => texts.push(t.as_str()),
            v1::PartContent::Data(d) => data.push(d.clone()),
            v1::PartContent::Raw(_) | v1::PartContent::Url(_) => files.push(part.clone()),
        }
    }
    if let Some(file) = files.first() {
        return Err(A2aError::UnsupportedContent {
            media_type: file
                .media_type
                .clone()
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| "a file without mediaType".to_owned()),
        });
    }
    let text = texts.join("\n");
    if text.trim().is_empty() && data.is_empty() {
        return Err(A2aError::EmptyMessage);
    }
    Ok(UserInput {
        message_id: message.message_id.clone(),
        context_id: message.context_id.clone().filter(|s| !s.is_empty()),
        task_id: message.task_id.clone().filter(|s| !s.is_empty()),
        text,
        data,
        files,
        reference_task_ids: message.reference_task_ids.clone(),
    })
}

/// Reads a v0.3 message sent by a client (see [`user_input_from_v1`]).
pub fn user_input_from_v03(message: &v03::Message) -> Result<UserInput, A2aError> {
    user_input_from_v1(&message.clone().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v1_msg(v: Value) -> v1::Message {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_parts_are_joined_and_ids_kept() {
        let m = v1_msg(
            json!({"messageId": "m1", "contextId": "ctx-1", "taskId": "task-1", "role": "ROLE_USER",
            "parts": [{"text": "hello"}, {"data": {"approve": true}}, {"text": "world"}]}),
        );
        let input = user_input_from_v1(&m).unwrap();
        assert_eq!(input.text, "hello\nworld");
        assert_eq!(input.data, vec![json!({"approve": true})]);
        assert!(input.files.is_empty());
        assert_eq!(
            (input.context_id.as_deref(), input.task_id.as_deref()),
            (Some("ctx-1"), Some("task-1"))
        );
    }

    #[test]
    fn v03_messages_read_the_same() {
        let m: v03::Message = serde_json::from_value(json!({"kind": "message", "messageId": "m2", "role": "user",
            "parts": [{"kind": "text", "text": "yo"}], "contextId": "45c48130-9a0d-4be4-84f4-4839736a827b"})).unwrap();
        let input = user_input_from_v03(&m).unwrap();
        assert_eq!(input.text, "yo");
        assert_eq!(
            input.context_id.as_deref(),
            Some("45c48130-9a0d-4be4-84f4-4839736a827b")
        );
        assert_eq!(input.task_id, None);
    }

    #[test]
    fn bad_messages_are_typed_errors() {
        let agent =
            v1_msg(json!({"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}));
        assert_eq!(user_input_from_v1(&agent), Err(A2aError::NotFromUser));
        let empty =
            v1_msg(json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "  "}]}));
        assert_eq!(user_input_from_v1(&empty), Err(A2aError::EmptyMessage));
        let no_id = v1_msg(json!({"messageId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}));
        assert_eq!(user_input_from_v1(&no_id), Err(A2aError::MissingMessageId));
        let unset = v1_msg(
            json!({"messageId": "m", "contextId": "", "role": "ROLE_USER", "parts": [{"text": "x"}]}),
        );
        assert_eq!(user_input_from_v1(&unset).unwrap().context_id, None);
        let bad_ctx = v1_msg(
            json!({"messageId": "m", "contextId": "../etc", "role": "ROLE_USER", "parts": [{"text": "x"}]}),
        );
        assert!(matches!(
            user_input_from_v1(&bad_ctx),
            Err(A2aError::InvalidId {
                field: "contextId",
                ..
            })
        ));
        let long_id = "m".repeat(129);
        for (message, field) in [
            (json!({"messageId": long_id}), "messageId"),
            (json!({"messageId": "m\u{0}\n"}), "messageId"),
            (json!({"messageId": "m 1"}), "messageId"),
            (
                json!({"messageId": "m", "referenceTaskIds": ["t1", "t/2"]}),
                "referenceTaskIds",
            ),
            (
                json!({"messageId": "m", "referenceTaskIds": [""]}),
                "referenceTaskIds",
            ),
        ] {
            let mut m = message;
            m["role"] = json!("ROLE_USER");
            m["parts"] = json!([{"text": "x"}]);
            let refused = user_input_from_v1(&v1_msg(m.clone())).unwrap_err();
            assert!(
                matches!(refused, A2aError::InvalidId { field: f, ref value } if f == field && value.len() <= 64),
                "{m}: {refused:?}"
            );
            let err: crate::JsonRpcError = refused.into();
            assert_eq!(err.code, -32602);
        }
        let ok = v1_msg(
            json!({"messageId": "m".repeat(128), "referenceTaskIds": ["task-1"], "role": "ROLE_USER", "parts": [{"text": "x"}]}),
        );
        assert_eq!(user_input_from_v1(&ok).unwrap().message_id.len(), 128);
        let no_role = v1_msg(json!({"messageId": "m", "parts": [{"text": "x"}]}));
        assert_eq!(user_input_from_v1(&no_role), Err(A2aError::MissingRole));
        let only_file = v1_msg(
            json!({"messageId": "m", "role": "ROLE_USER", "parts": [{"raw": "aGk=", "mediaType": "image/png"}]}),
        );
        let refused = user_input_from_v1(&only_file).unwrap_err();
        assert_eq!(
            refused,
            A2aError::UnsupportedContent {
                media_type: "image/png".into()
            }
        );
        let err: crate::JsonRpcError = refused.into();
        assert_eq!(err.code, -32005);
        assert_eq!(err.data.unwrap()[0]["reason"], "CONTENT_TYPE_NOT_SUPPORTED");
        let err: crate::JsonRpcError = A2aError::EmptyMessage.into();
        assert_eq!(err.code, -32602);
        let err: crate::JsonRpcError = A2aError::MissingRole.into();
        assert_eq!(err.code, -32602);
    }
}
