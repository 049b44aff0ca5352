//! The tools every agent can offer without configuration.

mod ask_user;
mod calculator;
mod current_time;

pub use ask_user::{AskUser, AskUserArgs};
pub use calculator::{CalcError, Calculator, CalculatorArgs, evaluate};
pub use current_time::{CurrentTime, CurrentTimeArgs};
