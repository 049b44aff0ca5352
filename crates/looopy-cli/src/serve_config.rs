//! `looopy serve` settings that need more than clap: the bearer tokens (whose silent
//! mistakes would turn authentication off) and the request limits that may also come from
//! the config file.

use std::ffi::OsString;
use std::time::Duration;

use looopy_server::ServerConfig;

use crate::cli::ServeArgs;
use crate::errors::Usage;
use crate::file_config::{DurationValue, FileConfig};

/// The environment variable listing the server's bearer tokens, comma-separated.
pub const TOKENS_ENV: &str = "LOOOPY_TOKENS";

/// The bearer tokens: every `--token` verbatim when any is given (flag > environment),
/// else [`TOKENS_ENV`] split on `,` with the whitespace around each entry removed (a token
/// cannot contain whitespace, so this never changes one). Any empty token — `--token ""`,
/// `LOOOPY_TOKENS=""`, `a,,b`, a trailing comma — is an error: an empty token used to
/// switch authentication off without a word. A token containing `,` can only be given
/// with `--token`.
pub fn resolve_tokens(flags: Vec<String>, env: Option<OsString>) -> Result<Vec<String>, String> {
    resolve_token_list("--token", TOKENS_ENV, flags, env)
}

/// The environment variable listing other agents' (A2A peers') tokens, comma-separated.
pub const PEER_TOKENS_ENV: &str = "LOOOPY_PEER_TOKENS";

/// The peer tokens: `--peer-token` flags, else [`PEER_TOKENS_ENV`], by the rules of
/// [`resolve_tokens`].
pub fn resolve_peer_tokens(
    flags: Vec<String>,
    env: Option<OsString>,
) -> Result<Vec<String>, String> {
    resolve_token_list("--peer-token", PEER_TOKENS_ENV, flags, env)
}

fn resolve_token_list(
    flag: &str,
    env_name: &str,
    flags: Vec<String>,
    env: Option<OsString>,
) -> Result<Vec<String>, String> {
    if !flags.is_empty() {
        if flags.iter().any(String::is_empty) {
            return Err(format!(
                "{flag} must not be empty (leave the flag out to run without it)"
            ));
        }
        return Ok(flags);
    }
    let Some(env) = env else {
        return Ok(Vec::new());
    };
    let list = env
        .into_string()
        .map_err(|_| format!("{env_name} is not valid UTF-8"))?;
    if list.trim().is_empty() {
        return Err(format!(
            "{env_name} is set but empty (unset it to run without it)"
        ));
    }
    list.split(',')
        .enumerate()
        .map(|(index, entry)| {
            let token = entry.trim();
            if token.is_empty() {
                Err(format!(
                    "{env_name} has an empty entry (entry {}); separate tokens with single commas",
                    index + 1
                ))
            } else {
                Ok(token.to_string())
            }
        })
        .collect()
}

/// The server's settings from its flags, the config file and the server's defaults, in
/// that order (flag > config file > default; the tokens are resolved by the caller).
/// A bad duration in the file is a usage error.
pub fn server_config(
    args: &ServeArgs,
    file: &FileConfig,
    tokens: Vec<String>,
    peer_tokens: Vec<String>,
) -> Result<ServerConfig, Usage> {
    let duration = |flag: Option<Duration>, value: &Option<DurationValue>, key: &str| match flag {
        Some(d) => Ok(Some(d)),
        None => value.as_ref().map(|v| v.get(key)).transpose(),
    };
    let defaults = ServerConfig::default();
    let mut config = ServerConfig {
        addr: args.addr.or(file.addr).unwrap_or(defaults.addr),
        tokens,
        peer_tokens,
        allow_internal: args.allow_internal || file.allow_internal.unwrap_or(false),
        keepalive: duration(args.keepalive, &file.keepalive, "keepalive")?
            .unwrap_or(defaults.keepalive)
            .max(Duration::from_secs(1)),
        cors_origins: if args.cors_origins.is_empty() {
            file.cors_origins.clone().unwrap_or_default()
        } else {
            args.cors_origins.clone()
        },
        body_limit: args
            .body_limit
            .or(file.body_limit)
            .unwrap_or(defaults.body_limit),
        body_timeout: duration(args.body_timeout, &file.body_timeout, "body_timeout")?
            .unwrap_or(defaults.body_timeout),
        max_message_bytes: args
            .max_message_bytes
            .or(file.max_message_bytes)
            .unwrap_or(defaults.max_message_bytes),
        max_streams: args
            .max_streams
            .or(file.max_streams)
            .unwrap_or(defaults.max_streams),
        max_streams_per_principal: args
            .max_streams_per_principal
            .or(file.max_streams_per_principal)
            .unwrap_or(defaults.max_streams_per_principal),
        max_streams_per_client: args
            .max_streams_per_client
            .or(file.max_streams_per_client)
            .unwrap_or(defaults.max_streams_per_client),
        max_stream_lifetime: duration(
            args.max_stream_lifetime,
            &file.max_stream_lifetime,
            "max_stream_lifetime",
        )?,
        metrics_public: args.metrics_public || file.metrics_public.unwrap_or(false),
        grpc_addr: args.grpc_addr.or(file.grpc_addr),
        public_url: args.public_url.clone().or_else(|| file.public_url.clone()),
        ..defaults
    };
    config.push.allow_private = args.push_allow_private || file.push_allow_private.unwrap_or(false);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(s: &str) -> Option<OsString> {
        Some(OsString::from(s))
    }

    #[test]
    fn flags_are_taken_verbatim_and_win_over_the_environment() {
        let tokens = resolve_tokens(vec!["a,b".into(), " c".into()], env("x,y")).unwrap();
        assert_eq!(tokens, ["a,b", " c"]);
    }

    #[test]
    fn the_environment_is_a_comma_separated_list() {
        assert_eq!(
            resolve_tokens(vec![], env("a, b ,c")).unwrap(),
            ["a", "b", "c"]
        );
        assert_eq!(resolve_tokens(vec![], env("solo")).unwrap(), ["solo"]);
        assert!(resolve_tokens(vec![], None).unwrap().is_empty());
    }

    #[test]
    fn peer_tokens_follow_the_same_rules_and_name_their_own_flag() {
        assert_eq!(
            resolve_peer_tokens(vec![], env("p1, p2")).unwrap(),
            ["p1", "p2"]
        );
        let err = resolve_peer_tokens(vec![String::new()], None).unwrap_err();
        assert!(err.contains("--peer-token"), "{err}");
        let err = resolve_peer_tokens(vec![], env("a,,b")).unwrap_err();
        assert!(err.contains(PEER_TOKENS_ENV), "{err}");
    }

    #[test]
    fn empty_tokens_are_errors_wherever_they_come_from() {
        assert!(resolve_tokens(vec![String::new()], None).is_err());
        assert!(resolve_tokens(vec!["a".into(), String::new()], None).is_err());
        for bad in ["", " ", "a,,b", "a,", ",a", "a, ,b"] {
            let err = resolve_tokens(vec![], env(bad)).unwrap_err();
            assert!(err.contains(TOKENS_ENV), "{bad:?}: {err}");
        }
    }
}
