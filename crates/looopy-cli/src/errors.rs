//! How a failed command is told: one line, each cause said once, and the exit status the
//! documented table gives it (docs/configuration.md, "Exit codes").

use std::process::ExitCode;

/// A usage or input error: a bad config file, an unknown task, a task that is not waiting,
/// a `--db` that cannot be a database. Exit status 2, like clap's own usage errors.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Usage(pub String);

impl Usage {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// The error and its causes joined with `: `, leaving out a cause whose text the line
/// already holds: many errors (io, SQLite, hyper) put their source's text in their own
/// Display, and anyhow's `{:#}` would print it twice (`Address already in use (os error
/// 98): Address already in use (os error 98)`).
pub fn one_line(error: &anyhow::Error) -> String {
    join_causes(error.chain().map(ToString::to_string))
}

/// [`one_line`] for any error with a `source()` chain (reqwest's, in `looopy tail`).
pub fn chain_text(error: &(dyn std::error::Error + 'static)) -> String {
    let mut texts = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        texts.push(e.to_string());
        next = e.source();
    }
    join_causes(texts)
}

fn join_causes(texts: impl IntoIterator<Item = String>) -> String {
    let mut line = String::new();
    for text in texts {
        let text = text.trim();
        if text.is_empty() || line.contains(text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(text);
    }
    line
}

/// The exit status for a command that failed with `error`: 2 for a usage or input error
/// (a [`Usage`] or a refused database anywhere in the chain), else 1.
pub fn exit_code(error: &anyhow::Error) -> ExitCode {
    let usage = error
        .chain()
        .any(|e| e.is::<Usage>() || e.is::<crate::agent_setup::DatabaseRefused>());
    if usage {
        ExitCode::from(2)
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_already_in_the_line_is_not_repeated() {
        let io = std::io::Error::new(std::io::ErrorKind::AddrInUse, "Address already in use");
        let error =
            anyhow::Error::new(io).context("binding 127.0.0.1:8080: Address already in use");
        assert_eq!(
            one_line(&error),
            "binding 127.0.0.1:8080: Address already in use"
        );
    }

    #[test]
    fn distinct_causes_are_all_said_in_order() {
        let error = anyhow::anyhow!("connection refused").context("connecting to the server");
        assert_eq!(
            one_line(&error),
            "connecting to the server: connection refused"
        );
    }

    #[test]
    fn usage_errors_exit_2_wherever_they_sit_in_the_chain() {
        let error = anyhow::Error::new(Usage::new("bad key")).context("config file x");
        assert_eq!(exit_code(&error), ExitCode::from(2));
        assert_eq!(exit_code(&anyhow::anyhow!("boom")), ExitCode::FAILURE);
    }
}
