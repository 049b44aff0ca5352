//! `ask_user`: lets the model ask the user a question. The turn pauses durably
//! (`input-required`, state `waiting-input`) and resumes with the answer as the result.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::tool::{InputRequest, Tool, ToolContext, ToolFailure};

/// Arguments of `ask_user`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct AskUserArgs {
    /// The question to ask the user.
    pub question: String,
}

/// Asks the user a clarifying question and returns the answer.
#[derive(Debug, Clone, Copy, Default)]
pub struct AskUser;

impl Tool for AskUser {
    const NAME: &'static str = "ask_user";
    type Args = AskUserArgs;
    type Output = Value;
    type Error = ToolFailure;

    fn description(&self) -> String {
        "Asks the user a question and waits for the answer. Use it when you need \
         information only the user has."
            .into()
    }

    async fn call(&self, args: AskUserArgs, ctx: ToolContext) -> Result<Value, ToolFailure> {
        match ctx.provided_input() {
            Some(answer) => Ok(answer.clone()),
            None => {
                Err(ctx
                    .require_input(InputRequest::clarification(args.question).require_user(true)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use looopy_protocol::event::InputType;

    #[tokio::test]
    async fn asks_then_answers() {
        let args = || AskUserArgs {
            question: "Which city?".into(),
        };
        let first = AskUser.call(args(), ToolContext::new("c1")).await;
        match first {
            Err(ToolFailure::NeedsInput(req)) => {
                assert_eq!(req.prompt, "Which city?");
                assert_eq!(req.input_type, InputType::Clarification);
                assert!(req.require_user);
            }
            other => panic!("expected a pause, got {other:?}"),
        }
        let ctx = ToolContext::new("c1").with_provided_input(Value::from("Paris"));
        assert_eq!(AskUser.call(args(), ctx).await, Ok(Value::from("Paris")));
    }
}
