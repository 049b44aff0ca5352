//! The Chat Completions stream chunk, decoded leniently and without copying text: every
//! field optional, unknown fields ignored, odd shapes tolerated.

use serde::Deserialize;
use serde_json::Value;

use crate::http::lenient::{Arguments, Text, lenient_u64};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Chunk<'a> {
    #[serde(borrow)]
    pub choices: Option<Vec<Choice<'a>>>,
    pub usage: Option<Usage>,
    /// A mid-stream error object (`{"error": {"message": …}}`).
    pub error: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Choice<'a> {
    #[serde(deserialize_with = "lenient_u64")]
    pub index: Option<u64>,
    #[serde(borrow)]
    pub delta: Option<Delta<'a>>,
    #[serde(borrow)]
    pub finish_reason: Option<Text<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Delta<'a> {
    #[serde(borrow)]
    pub content: Option<Text<'a>>,
    /// DeepSeek, vLLM, LiteLLM.
    #[serde(borrow)]
    pub reasoning_content: Option<Text<'a>>,
    /// OpenRouter, Ollama, newer vLLM.
    #[serde(borrow)]
    pub reasoning: Option<Text<'a>>,
    #[serde(borrow)]
    pub tool_calls: Option<Vec<ToolCallFragment<'a>>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct ToolCallFragment<'a> {
    #[serde(deserialize_with = "lenient_u64")]
    pub index: Option<u64>,
    #[serde(borrow)]
    pub id: Option<Text<'a>>,
    #[serde(borrow)]
    pub function: Option<FunctionFragment<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct FunctionFragment<'a> {
    #[serde(borrow)]
    pub name: Option<Text<'a>>,
    #[serde(borrow)]
    pub arguments: Option<Arguments<'a>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(super) struct Usage {
    #[serde(alias = "input_tokens", deserialize_with = "lenient_u64")]
    pub prompt_tokens: Option<u64>,
    #[serde(alias = "output_tokens", deserialize_with = "lenient_u64")]
    pub completion_tokens: Option<u64>,
    #[serde(deserialize_with = "lenient_u64")]
    pub total_tokens: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gateway_quirks_decode() {
        let chunk: Chunk<'_> = serde_json::from_str(
            r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning":"hm","tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"f","arguments":{"a":1}}}]},"finish_reason":"","logprobs":null}],"usage":null,"system_fingerprint":"fp"}"#,
        )
        .unwrap();
        let choice = &chunk.choices.as_ref().unwrap()[0];
        let delta = choice.delta.as_ref().unwrap();
        assert!(delta.content.is_none());
        assert_eq!(delta.reasoning.as_ref().unwrap().as_str(), "hm");
        let call = &delta.tool_calls.as_ref().unwrap()[0];
        assert_eq!(
            call.function
                .as_ref()
                .unwrap()
                .arguments
                .as_ref()
                .unwrap()
                .0,
            r#"{"a":1}"#
        );
        assert_eq!(choice.finish_reason.as_ref().unwrap().as_str(), "");

        let usage_only: Chunk<'_> =
            serde_json::from_str(r#"{"choices":null,"usage":{"prompt_tokens":3,"completion_tokens":"4","total_tokens":7.0}}"#)
                .unwrap();
        let usage = usage_only.usage.unwrap();
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.completion_tokens,
                usage.total_tokens
            ),
            (Some(3), Some(4), Some(7))
        );
    }
}
