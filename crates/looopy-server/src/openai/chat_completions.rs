//! `POST /v1/chat/completions`: a turn in a new context of the caller's, answered as a
//! chat completion (or its chunks). The answer is the Responses mapping's text
//! ([`ResponseMapper`]), so both doors show the same turn the same way.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::Stream;
use looopy_protocol::Message;
use looopy_protocol::ids::ContextId;
use serde::Deserialize;
use serde_json::{Value, json};

use super::models;
use super::responses::request::content_text;
use super::responses::routes::{drive, open};
use super::responses::{Header, ResponseId, ResponseMapper};
use crate::auth::Principal;
use crate::events::EventStream;
use crate::extract::{ApiJson, Connection};
use crate::{ApiError, AppState};

/// The request body (other fields the SDKs send are accepted and ignored).
#[derive(Debug, Deserialize)]
pub(crate) struct ChatRequest {
    #[serde(default)]
    model: Option<String>,
    messages: Vec<ChatMessage>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<StreamOptions>,
    #[serde(default)]
    tools: Option<Vec<Value>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChatMessage {
    role: String,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct StreamOptions {
    #[serde(default)]
    include_usage: bool,
}

impl ChatRequest {
    /// The turn's input: the last message, which must be the user's, preceded — when
    /// there are earlier messages — by a transcript of them (the conversation so far is
    /// seeded into the new context's first message: Chat Completions clients resend it
    /// every time and keep no server-side state).
    pub(crate) fn input(&self) -> Result<String, ApiError> {
        if self.tools.as_ref().is_some_and(|t| !t.is_empty()) {
            return Err(ApiError::bad_request(
                "unsupported_tools",
                "client-declared tools are not supported by this server yet; the agent runs \
                 its own tools",
            ));
        }
        let Some((last, earlier)) = self.messages.split_last() else {
            return Err(ApiError::bad_request(
                "empty_messages",
                "messages must hold at least one user message",
            ));
        };
        if last.role != "user" {
            return Err(ApiError::bad_request(
                "invalid_messages",
                format!("the last message must be the user's, not {:?}", last.role),
            ));
        }
        let text = content_text(last.content.as_ref());
        if text.trim().is_empty() {
            return Err(ApiError::bad_request(
                "empty_message",
                "the last user message has no text",
            ));
        }
        let transcript: Vec<String> = earlier
            .iter()
            .filter(|m| m.role != "tool")
            .map(|m| format!("{}: {}", m.role, content_text(m.content.as_ref())))
            .collect();
        if transcript.is_empty() {
            return Ok(text);
        }
        Ok(format!(
            "The conversation so far:\n{}\n\nThe user now says:\n{text}",
            transcript.join("\n")
        ))
    }
}

/// `POST /v1/chat/completions`.
pub(crate) async fn create(
    State(state): State<AppState>,
    principal: Principal,
    Connection(conn): Connection,
    ApiJson(body): ApiJson<ChatRequest>,
) -> Result<Response, ApiError> {
    let input = body.input()?;
    let model = models::check(body.model.as_deref())?;
    let context_id = ContextId::generate();
    let permit = state.streams().acquire(&principal, conn.as_ref())?;
    let started = state
        .start_turn_with(&principal, &context_id, Message::user(input))
        .await?;
    let rid = ResponseId {
        task_id: started.task_id.clone(),
        start_seq: started.start_seq,
    };
    let created = chrono::Utc::now().timestamp();
    let header = Header {
        id: rid.to_string(),
        created_at: created,
        model: model.clone(),
        instructions: None,
        metadata: Default::default(),
        previous_response_id: None,
        background: false,
        tools: Vec::new(),
    };
    let mapper = ResponseMapper::new(header, rid.task_id.clone());
    let events = open(&state, permit, conn, context_id.as_str(), &rid);
    let ids = Ids {
        id: format!("chatcmpl-{}", rid.task_id),
        created,
        model,
    };
    if body.stream.unwrap_or(false) {
        let usage = body.stream_options.unwrap_or_default().include_usage;
        return Ok(super::sse(
            &state,
            ChunkFrames::new(events, mapper, ids, usage),
        ));
    }
    let mapper = drive(events, mapper).await;
    if mapper.status() == "failed" || !mapper.is_settled() {
        let message = mapper
            .error_message()
            .unwrap_or_else(|| "the turn did not finish".into());
        return Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            message,
        ));
    }
    let mut message =
        json!({"role": "assistant", "content": mapper.output_text(), "refusal": null});
    let reasoning = mapper.reasoning_text();
    if !reasoning.is_empty() {
        message["reasoning_content"] = json!(reasoning);
    }
    Ok(Json(json!({
        "id": ids.id,
        "object": "chat.completion",
        "created": ids.created,
        "model": ids.model,
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": null}],
        "usage": usage(&mapper),
    }))
    .into_response())
}

struct Ids {
    id: String,
    created: i64,
    model: String,
}

fn usage(mapper: &ResponseMapper) -> Value {
    let (input, output, total) = mapper.usage();
    json!({"prompt_tokens": input, "completion_tokens": output, "total_tokens": total})
}

/// The chunks of a streamed chat completion, then `data: [DONE]`.
struct ChunkFrames {
    events: EventStream,
    mapper: ResponseMapper,
    ids: Ids,
    include_usage: bool,
    pending: VecDeque<Bytes>,
    scratch: Vec<Value>,
    started: bool,
    done: bool,
}

impl ChunkFrames {
    fn new(events: EventStream, mapper: ResponseMapper, ids: Ids, include_usage: bool) -> Self {
        Self {
            events,
            mapper,
            ids,
            include_usage,
            pending: VecDeque::new(),
            scratch: Vec::new(),
            started: false,
            done: false,
        }
    }

    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        let mut chunk = json!({
            "id": self.ids.id, "object": "chat.completion.chunk", "created": self.ids.created,
            "model": self.ids.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        });
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }

    fn push(&mut self, value: &Value) {
        self.pending
            .push_back(Bytes::from(format!("data: {value}\n\n")));
    }

    /// Turns the Responses events in `scratch` into chunks.
    fn translate(&mut self) {
        let events: Vec<Value> = self.scratch.drain(..).collect();
        for event in events {
            match event["type"].as_str().unwrap_or("") {
                "response.output_text.delta" => {
                    let chunk = self.chunk(json!({"content": event["delta"]}), None);
                    self.push(&chunk);
                }
                "response.reasoning_text.delta" => {
                    let chunk = self.chunk(json!({"reasoning_content": event["delta"]}), None);
                    self.push(&chunk);
                }
                "response.completed" | "response.incomplete" => {
                    let chunk = self.chunk(json!({}), Some("stop"));
                    self.push(&chunk);
                    if self.include_usage {
                        let mut last = self.chunk(json!({}), None);
                        last["choices"] = json!([]);
                        last["usage"] = usage(&self.mapper);
                        self.push(&last);
                    }
                    self.pending
                        .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
                }
                "response.failed" | "error" => {
                    // OpenAI's in-stream error: the SDKs raise it as an `APIError`.
                    let message = self
                        .mapper
                        .error_message()
                        .or_else(|| event["message"].as_str().map(str::to_string))
                        .unwrap_or_else(|| "the turn failed".into());
                    let body = super::errors::body(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "server_error",
                        &message,
                    );
                    self.push(&body);
                }
                _ => {}
            }
        }
    }
}

impl Stream for ChunkFrames {
    type Item = Bytes;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Bytes>> {
        let this = &mut *self;
        loop {
            if !this.started {
                this.started = true;
                this.mapper.start(&mut this.scratch);
                this.scratch.clear();
                let first = this.chunk(json!({"role": "assistant", "content": ""}), None);
                this.push(&first);
            }
            if let Some(next) = this.pending.pop_front() {
                return Poll::Ready(Some(next));
            }
            if this.done || this.mapper.is_settled() {
                this.done = true;
                return Poll::Ready(None);
            }
            match Pin::new(&mut this.events).poll_next(cx) {
                Poll::Ready(Some(event)) => {
                    this.mapper.map(&event, &mut this.scratch);
                    this.translate();
                }
                Poll::Ready(None) => {
                    this.mapper
                        .interrupt("the event stream ended", &mut this.scratch);
                    this.translate();
                    this.done = true;
                }
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(body: Value) -> Result<String, ApiError> {
        serde_json::from_value::<ChatRequest>(body).unwrap().input()
    }

    #[test]
    fn the_last_user_message_is_the_input_and_earlier_ones_a_transcript() {
        assert_eq!(
            input(json!({"messages": [{"role": "user", "content": "What is 6*7?"}]})).unwrap(),
            "What is 6*7?"
        );
        let seeded = input(json!({"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            {"role": "assistant", "content": "Hello"},
            {"role": "user", "content": "What is 6*7?"}
        ]}))
        .unwrap();
        assert_eq!(
            seeded,
            "The conversation so far:\nsystem: Be brief.\nuser: Hi\nassistant: Hello\n\n\
             The user now says:\nWhat is 6*7?"
        );
    }

    #[test]
    fn requests_without_a_user_message_last_are_refused() {
        let code = |body| input(body).unwrap_err().code().to_string();
        assert_eq!(code(json!({"messages": []})), "empty_messages");
        assert_eq!(
            code(json!({"messages": [{"role": "assistant", "content": "x"}]})),
            "invalid_messages"
        );
        assert_eq!(
            code(json!({"messages": [{"role": "user", "content": " "}]})),
            "empty_message"
        );
    }
}
