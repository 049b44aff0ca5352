//! Anthropic Messages stream events, decoded leniently and without copying text.

use serde::Deserialize;
use serde_json::Value;

use crate::http::lenient::{Text, lenient_u64};

/// Every event type in one flat shape: each uses the fields it needs.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct StreamEvent<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Option<Text<'a>>,
    pub message: Option<MessageStart>,
    #[serde(deserialize_with = "lenient_u64")]
    pub index: Option<u64>,
    #[serde(borrow)]
    pub content_block: Option<ContentBlock<'a>>,
    #[serde(borrow)]
    pub delta: Option<Delta<'a>>,
    pub usage: Option<Usage>,
    pub error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct MessageStart {
    pub usage: Option<Usage>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ContentBlock<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(borrow)]
    pub id: Option<Text<'a>>,
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    /// Tool input; normally `{}` with the real input streamed as `input_json_delta`.
    pub input: Option<Value>,
    #[serde(borrow)]
    pub text: Option<Text<'a>>,
    #[serde(borrow)]
    pub thinking: Option<Text<'a>>,
    #[serde(borrow)]
    pub signature: Option<Text<'a>>,
    /// Redacted thinking payload.
    #[serde(borrow)]
    pub data: Option<Text<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Delta<'a> {
    #[serde(rename = "type", borrow)]
    pub kind: Option<Text<'a>>,
    #[serde(borrow)]
    pub text: Option<Text<'a>>,
    #[serde(borrow)]
    pub partial_json: Option<Text<'a>>,
    #[serde(borrow)]
    pub thinking: Option<Text<'a>>,
    #[serde(borrow)]
    pub signature: Option<Text<'a>>,
    #[serde(borrow)]
    pub stop_reason: Option<Text<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Usage {
    #[serde(deserialize_with = "lenient_u64")]
    pub input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    pub output_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    pub cache_creation_input_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    pub cache_read_input_tokens: Option<u64>,
}

impl Usage {
    /// All input the model read, cached or not (`TokenUsage` has one input count).
    pub(super) fn total_input(&self) -> Option<u64> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts
            .iter()
            .any(Option::is_some)
            .then(|| parts.iter().flatten().sum())
    }
}
