//! How an MCP server is declared: a name and a transport — a child process speaking stdio,
//! or a streamable-HTTP endpoint — from the config file (`[[mcp]]`) or the command line
//! (`--mcp NAME=COMMAND ARGS…`, `--mcp NAME=URL`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::McpError;

/// One MCP server.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerSpec {
    /// Its tools are registered as `{name}__{tool}`: `[A-Za-z0-9_-]`, at most 32.
    pub name: String,
    /// A program to start, speaking MCP over its stdin and stdout.
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables for the program (added to Looopy's own).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// A streamable-HTTP endpoint instead of a program.
    #[serde(default)]
    pub url: Option<String>,
    /// Static request headers for `url` (an API key, say): never logged.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Per-user authorization for `url`: `"oauth"` (the MCP authorization spec: discovery,
    /// dynamic registration or `client_id`, PKCE) or `"bearer"` (each user pastes a token).
    /// A server that answers 401 without it is treated as `"oauth"`.
    #[serde(default)]
    pub auth: Option<McpAuth>,
    /// A pre-registered OAuth client (else Looopy registers itself dynamically).
    #[serde(default)]
    pub client_id: Option<String>,
    #[serde(default)]
    pub client_secret: Option<String>,
    /// Scopes to ask for (else the server's challenge or metadata says).
    #[serde(default)]
    pub scopes: Vec<String>,
}

/// How users authorize Looopy to an MCP server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum McpAuth {
    OAuth,
    Bearer,
}

impl std::fmt::Debug for McpServerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Environment values and headers often hold credentials: names only.
        f.debug_struct("McpServerSpec")
            .field("name", &self.name)
            .field("command", &self.command)
            .field("args", &self.args)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("auth", &self.auth)
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "[redacted]"),
            )
            .field("scopes", &self.scopes)
            .finish()
    }
}

/// Where a server runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport<'a> {
    Stdio {
        command: &'a str,
        args: &'a [String],
    },
    Http {
        url: &'a str,
    },
}

impl McpServerSpec {
    /// A server started as `command args…`.
    pub fn stdio(name: impl Into<String>, command: impl Into<String>, args: Vec<String>) -> Self {
        Self {
            name: name.into(),
            command: Some(command.into()),
            args,
            env: BTreeMap::new(),
            url: None,
            headers: BTreeMap::new(),
            auth: None,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
        }
    }

    /// A server at a streamable-HTTP `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            url: Some(url.into()),
            headers: BTreeMap::new(),
            auth: None,
            client_id: None,
            client_secret: None,
            scopes: Vec::new(),
        }
    }

    /// Asks each user to authorize (`auth`).
    pub fn with_auth(mut self, auth: McpAuth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// `NAME=URL` (an `http://` or `https://` URL) or `NAME=COMMAND ARGS…` (split on
    /// whitespace; quote nothing — use the config file for arguments with spaces).
    pub fn parse_cli(value: &str) -> Result<Self, McpError> {
        let (name, rest) = value.split_once('=').ok_or_else(|| {
            McpError::Config(format!(
                "--mcp {value:?}: expected NAME=COMMAND [ARGS...] or NAME=URL"
            ))
        })?;
        let rest = rest.trim();
        let spec = if rest.starts_with("http://") || rest.starts_with("https://") {
            Self::http(name, rest)
        } else {
            let mut words = rest.split_whitespace().map(str::to_owned);
            let command = words
                .next()
                .ok_or_else(|| McpError::Config(format!("--mcp {name}: no command or URL")))?;
            Self::stdio(name, command, words.collect())
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the name and that exactly one transport is given.
    pub fn validate(&self) -> Result<(), McpError> {
        let name = &self.name;
        let valid = !name.is_empty()
            && name.len() <= 32
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            && !name.contains("__");
        if !valid {
            return Err(McpError::Config(format!(
                "MCP server name {name:?}: use 1-32 of A-Z a-z 0-9 _ - (and no \"__\")"
            )));
        }
        if self.auth.is_some() && self.url.is_none() {
            return Err(McpError::Config(format!(
                "MCP server {name}: auth needs a url (stdio servers get credentials through env)"
            )));
        }
        self.transport().map(drop)
    }

    /// The transport, or why the declaration is ambiguous.
    pub fn transport(&self) -> Result<Transport<'_>, McpError> {
        match (&self.command, &self.url) {
            (Some(command), None) if !command.trim().is_empty() => Ok(Transport::Stdio {
                command,
                args: &self.args,
            }),
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                Ok(Transport::Http { url })
            }
            (None, Some(url)) => Err(McpError::Config(format!(
                "MCP server {}: url {url:?} is not http:// or https://",
                self.name
            ))),
            _ => Err(McpError::Config(format!(
                "MCP server {}: give either command (stdio) or url (streamable HTTP)",
                self.name
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_values_name_a_command_or_a_url() {
        let s = McpServerSpec::parse_cli("fs=npx -y server-fs /tmp").unwrap();
        assert_eq!(
            s.transport().unwrap(),
            Transport::Stdio {
                command: "npx",
                args: &["-y".to_string(), "server-fs".into(), "/tmp".into()]
            }
        );
        let s = McpServerSpec::parse_cli("docs=https://mcp.example/mcp").unwrap();
        assert_eq!(
            s.transport().unwrap(),
            Transport::Http {
                url: "https://mcp.example/mcp"
            }
        );
        for bad in ["nope", "=x", "a__b=x", "ok=", "bad name=x"] {
            assert!(McpServerSpec::parse_cli(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_output_names_headers_and_env_but_not_their_values() {
        let mut s = McpServerSpec::http("docs", "https://mcp.example");
        s.headers
            .insert("Authorization".into(), "Bearer s3cret".into());
        s.env.insert("API_KEY".into(), "k3y".into());
        let shown = format!("{s:?}");
        assert!(shown.contains("Authorization") && !shown.contains("s3cret"));
        assert!(shown.contains("API_KEY") && !shown.contains("k3y"));
    }
}
