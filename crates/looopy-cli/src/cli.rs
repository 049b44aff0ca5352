//! Command-line definitions. Flags mirror environment variables and the config file, in
//! that order of precedence: flag > environment > config file > built-in default.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "looopy", version, about = "Looopy — a streaming agent runtime")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the streaming parsers over JSON Lines chunks read from stdin.
    Parse(ParseArgs),
    /// Run one turn of the agent and print its events.
    Run(RunArgs),
    /// Interactive chat with the agent.
    Chat(ChatArgs),
    /// Answer a task that is waiting for input and continue it.
    Resume(ResumeArgs),
    /// Serve the agent over HTTP: SSE event streams, A2A, and a web page.
    Serve(Box<ServeArgs>),
    /// Follow a running server's event stream for a context.
    Tail(TailArgs),
    /// List a task's artifacts (files, data, datasets), or save them with --out.
    Artifacts(ArtifactsArgs),
    /// Talk to any A2A agent: print its card, send it a message, get or cancel a task.
    A2a(crate::a2a_cmd::A2aArgs),
    /// Serve the agent as an MCP server over stdio (its `ask` tool), for editors and
    /// other agents that speak MCP.
    Mcp(crate::mcp_cmd::McpArgs),
    /// Database maintenance: `db migrate` copies a SQLite database into PostgreSQL and
    /// verifies the copy.
    Db(crate::db_cmd::DbArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ParseProtocol {
    /// Inline thought tags (`<thinking>…</thinking>`) → content-delta / thought-stream.
    Thinking,
    /// The text wire protocol (`<think>`, `<execute>`, `<respond>`, `<end>`).
    Wire,
}

#[derive(Debug, Args)]
pub struct ParseArgs {
    /// Which parser to run.
    #[arg(long, value_enum)]
    pub protocol: ParseProtocol,
    /// Comma-separated thought tag names (thinking protocol only).
    #[arg(long, value_delimiter = ',')]
    pub tags: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProviderKind {
    Openai,
    Anthropic,
    Scripted,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ToolProtocolArg {
    /// The provider's native function calling.
    Native,
    /// The text wire protocol, for models without function calling.
    Wire,
}

/// Help headings: `-h` shows the few flags a single user needs, `--help` all of them,
/// grouped under these.
pub const MODEL: &str = "Model";
pub const STATE: &str = "Conversation and storage";
pub const TOOLS: &str = "Tools";
pub const SERVER: &str = "Server";
pub const LIMITS: &str = "Limits";
pub const REPLICAS: &str = "Replicas (a PostgreSQL --db)";
pub const TELEMETRY: &str = "Telemetry";

/// How to reach the model and where to keep state; shared by every agent command.
#[derive(Debug, Clone, Args, Default)]
pub struct AgentArgs {
    /// Model provider [default: openai if OPENAI_API_KEY/OPENAI_BASE_URL is set, anthropic if
    /// ANTHROPIC_API_KEY is set, otherwise the built-in scripted model].
    #[arg(long, value_enum, env = "LOOOPY_PROVIDER", help_heading = MODEL)]
    pub provider: Option<ProviderKind>,
    /// Provider base URL; an OpenAI-compatible server's ends in /v1 (LiteLLM, vLLM, Ollama,
    /// llama.cpp …) [env: OPENAI_BASE_URL or ANTHROPIC_BASE_URL; default: the provider's
    /// public API].
    #[arg(long, value_name = "URL", help_heading = MODEL)]
    pub base_url: Option<String>,
    /// Model name [default: OPENAI_MODEL or ANTHROPIC_MODEL, else the provider's default].
    #[arg(long, env = "LOOOPY_MODEL", help_heading = MODEL)]
    pub model: Option<String>,
    /// API key [env: OPENAI_API_KEY or ANTHROPIC_API_KEY, by provider].
    #[arg(long, hide_env_values = true, value_name = "KEY", help_heading = MODEL)]
    pub api_key: Option<String>,
    /// How the model calls tools [default: native].
    #[arg(long, value_enum, hide_short_help = true, help_heading = MODEL)]
    pub tool_protocol: Option<ToolProtocolArg>,
    /// Maximum model calls per turn [default: 20].
    #[arg(long, value_name = "N", hide_short_help = true, help_heading = MODEL)]
    pub max_iterations: Option<u32>,
    /// Script file for the scripted provider (JSON or YAML).
    #[arg(long, value_name = "FILE", hide_short_help = true, help_heading = MODEL)]
    pub script: Option<PathBuf>,
    /// System prompt.
    #[arg(long, value_name = "TEXT", hide_short_help = true, help_heading = MODEL)]
    pub system: Option<String>,
    /// SQLite database file, or a PostgreSQL URL (`postgres://user@host/db`) shared by
    /// replicas [default: the config file's `db`, else ~/.looopy/looopy.db].
    #[arg(long, env = "LOOOPY_DB", value_name = "PATH|URL", help_heading = STATE)]
    pub db: Option<PathBuf>,
    /// Config file (TOML) [default: ~/.config/looopy/config.toml when it exists].
    #[arg(long, env = "LOOOPY_CONFIG", value_name = "FILE", help_heading = STATE)]
    pub config: Option<PathBuf>,
    /// File with the 256-bit key that seals the credentials users give tools (64 hex
    /// digits, base64, or 32 raw bytes; e.g. `openssl rand -hex 32 > key`) [env:
    /// LOOOPY_SECRET_KEY holds the key itself; default: credentials in memory only].
    #[arg(long, value_name = "FILE", hide_short_help = true, help_heading = STATE)]
    pub secret_key_file: Option<PathBuf>,
    /// Directory the workspace tools (list_files, read_file, write_file, edit_file,
    /// search_files) work in, created if missing; paths outside it are refused [default:
    /// one directory per conversation, `<db dir>/workspaces/<context id>`; never the
    /// current directory unasked].
    #[arg(long, value_name = "DIR", help_heading = TOOLS)]
    pub workspace: Option<PathBuf>,
    /// Also offer the `shell` tool: commands run with `sh -c` in the workspace (a working
    /// directory, not a sandbox). Needs --workspace.
    #[arg(long, hide_short_help = true, help_heading = TOOLS)]
    pub allow_shell: bool,
    /// An MCP server whose tools the agent gets (as `NAME__TOOL`), repeatable:
    /// `NAME=COMMAND [ARGS...]` (stdio) or `NAME=URL` (streamable HTTP). Added to the
    /// config file's `[[mcp]]` servers.
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL", hide_short_help = true, help_heading = TOOLS)]
    pub mcp: Vec<String>,
    /// With a PostgreSQL --db: this process's name among the replicas (the owner of the
    /// context leases it takes) [default: host name, process id and a random suffix].
    #[arg(long, env = "LOOOPY_REPLICA_ID", value_name = "NAME", hide_short_help = true, help_heading = REPLICAS)]
    pub replica_id: Option<String>,
    /// With a PostgreSQL --db: how long a context's lease lasts unrenewed; another replica
    /// fails the turns of one that died within about this long (`15s`, `500ms`, `2m`)
    /// [default: 15s].
    #[arg(long, env = "LOOOPY_LEASE_TTL", value_name = "DURATION", value_parser = parse_duration, hide_short_help = true, help_heading = REPLICAS)]
    pub lease_ttl: Option<std::time::Duration>,
    /// Turns whose process died mid-run (found at start-up, or by another replica once the
    /// lease expired) continue from their last completed iteration, announced by a
    /// `task-status: working` with `metadata.resumed`, instead of failing with
    /// `interrupted`. Tools of the interrupted iteration may run again.
    #[arg(long, env = "LOOOPY_RESUME_INTERRUPTED", hide_short_help = true, help_heading = REPLICAS)]
    pub resume_interrupted: bool,
    /// Send traces (the `invoke_agent`, `chat` and `execute_tool` spans) over OTLP/HTTP
    /// protobuf to this base URL (`<URL>/v1/traces`), e.g. http://127.0.0.1:4318
    /// [default: off].
    #[arg(long, env = "OTEL_EXPORTER_OTLP_ENDPOINT", value_name = "URL", hide_short_help = true, help_heading = TELEMETRY)]
    pub otlp_endpoint: Option<String>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Print every event as one JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Log warnings to stderr, and after the turn print its span tree with timings (a
    /// waterfall) [default: logs only with RUST_LOG].
    #[arg(long, short = 'v')]
    pub verbose: bool,
    /// Conversation to continue [default: a new one].
    #[arg(long, value_name = "ID")]
    pub context: Option<looopy_protocol::ids::ContextId>,
    /// The user message.
    #[arg(required = true, num_args = 1..)]
    pub prompt: Vec<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// Conversation to continue; it must exist, and what was said so far is shown
    /// [default: a new one].
    #[arg(long, value_name = "ID")]
    pub context: Option<looopy_protocol::ids::ContextId>,
    /// With --context: start a new conversation with that id (refused if it exists).
    #[arg(long, requires = "context")]
    pub new: bool,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The task waiting for input (or for authorization).
    pub task: String,
    /// The value to provide (parsed as JSON when it is valid JSON, else taken as text).
    /// For a task waiting for authorization: the key or token, or `-` to type it hidden
    /// (read from stdin when it is not a terminal) — a secret on the command line ends up
    /// in the shell's history.
    pub value: String,
    /// Which input request to answer [default: the task's pending one].
    #[arg(long, hide_short_help = true)]
    pub input_id: Option<String>,
    /// Print every event as one JSON object per line.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on [default: 127.0.0.1:8080].
    #[arg(long, value_name = "HOST:PORT", help_heading = SERVER)]
    pub addr: Option<SocketAddr>,
    /// Bearer token accepted by the server, taken verbatim (a `,` is part of the token);
    /// repeat for several principals [env: LOOOPY_TOKENS, comma-separated]. An empty token
    /// is an error, never "authentication off".
    // No `env` and no `value_delimiter` here: clap would split the flag's value too, and
    // would not tell an empty variable from an absent one. `serve_cmd` reads the variable.
    #[arg(long = "token", value_name = "TOKEN", help_heading = SERVER)]
    pub tokens: Vec<String>,
    /// Bearer token of another agent (an A2A peer), repeatable [env: LOOOPY_PEER_TOKENS,
    /// comma-separated]. A peer is a principal like a --token one, but its answers to input
    /// requests are an agent's: it cannot answer requests that need the user
    /// (`requireUser`), and `input-received.providedBy` is `agent`.
    #[arg(long = "peer-token", value_name = "TOKEN", hide_short_help = true, help_heading = SERVER)]
    pub peer_tokens: Vec<String>,
    /// The URL users reach this server at, when it is not the bound address (behind a
    /// proxy): OAuth authorization servers send the browser back to
    /// `{URL}/v1/oauth/callback`.
    #[arg(long, env = "LOOOPY_PUBLIC_URL", value_name = "URL", hide_short_help = true, help_heading = SERVER)]
    pub public_url: Option<String>,
    /// Allowed CORS origins (`*` for any), repeatable [default: none, CORS off].
    #[arg(long = "cors-origin", value_name = "ORIGIN", hide_short_help = true, help_heading = SERVER)]
    pub cors_origins: Vec<String>,
    /// Send `internal:*` events to clients too.
    #[arg(long, hide_short_help = true, help_heading = SERVER)]
    pub allow_internal: bool,
    /// Serve `GET /metrics` (Prometheus text format) without a token; by default it needs
    /// one like every API route when tokens are configured.
    #[arg(long, hide_short_help = true, help_heading = SERVER)]
    pub metrics_public: bool,
    /// Accept A2A push-notification webhooks on private, loopback and link-local
    /// addresses (tests, trusted networks); refused by default.
    #[arg(long, hide_short_help = true, help_heading = SERVER)]
    pub push_allow_private: bool,
    /// Also serve A2A over gRPC (cleartext HTTP/2) on this address, e.g. 127.0.0.1:8081
    /// (port 0 picks a free one); the agent card declares it [default: off].
    #[arg(long, value_name = "HOST:PORT", hide_short_help = true, help_heading = SERVER)]
    pub grpc_addr: Option<SocketAddr>,
    /// Time between keep-alive comments on idle streams (`15s`; a bare number is seconds;
    /// `--keepalive-secs` still works) [default: 15s].
    #[arg(long, alias = "keepalive-secs", value_name = "DURATION", value_parser = parse_duration, hide_short_help = true, help_heading = LIMITS)]
    pub keepalive: Option<std::time::Duration>,
    /// Maximum request body in bytes [default: 2097152].
    #[arg(long, value_name = "BYTES", hide_short_help = true, help_heading = LIMITS)]
    pub body_limit: Option<usize>,
    /// How long a request body may take to arrive (`30s`; a bare number is seconds); slower
    /// bodies get 408 and the connection is closed [default: 30s].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, hide_short_help = true, help_heading = LIMITS)]
    pub body_timeout: Option<std::time::Duration>,
    /// Maximum user message in bytes; larger ones get 413 [default: 1048576].
    #[arg(long, value_name = "BYTES", hide_short_help = true, help_heading = LIMITS)]
    pub max_message_bytes: Option<usize>,
    /// Maximum concurrent event streams of the whole server (503 beyond); an idle stream
    /// costs about 13 KiB and a file descriptor [default: 10000].
    #[arg(long, value_name = "N", hide_short_help = true, help_heading = LIMITS)]
    pub max_streams: Option<usize>,
    /// Maximum concurrent event streams per token (429 beyond) [default: 64].
    #[arg(long, value_name = "N", hide_short_help = true, help_heading = LIMITS)]
    pub max_streams_per_principal: Option<usize>,
    /// Without --token: maximum concurrent event streams per client IP address (IPv6:
    /// per /64) (429 beyond) [default: 32].
    #[arg(long, value_name = "N", hide_short_help = true, help_heading = LIMITS)]
    pub max_streams_per_client: Option<usize>,
    /// End `GET …/events` streams after this long (`15m`; a bare number is seconds;
    /// clients resume with Last-Event-ID) [default: open until the client leaves].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, hide_short_help = true, help_heading = LIMITS)]
    pub max_stream_lifetime: Option<std::time::Duration>,
    /// With a PostgreSQL --db: the NATS server (JetStream) that tells the replicas of each
    /// other's events [default: PostgreSQL LISTEN/NOTIFY (slower)].
    #[arg(long, env = "LOOOPY_NATS", value_name = "URL", hide_short_help = true, help_heading = REPLICAS)]
    pub nats: Option<String>,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Args)]
pub struct TailArgs {
    /// Server base URL, e.g. http://127.0.0.1:8080
    pub url: String,
    /// Context to follow.
    #[arg(long)]
    pub context: looopy_protocol::ids::ContextId,
    /// Bearer token the server expects.
    #[arg(long, env = "LOOOPY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// Print events as JSON lines.
    #[arg(long)]
    pub json: bool,
    /// Start after this event id [default: from the beginning].
    #[arg(long)]
    pub last_event_id: Option<u64>,
    /// Only this task's events.
    #[arg(long)]
    pub task: Option<String>,
    /// Exit once the followed task (or, without --task, any top-level task) ends.
    #[arg(long)]
    pub until_done: bool,
}

#[derive(Debug, Args)]
pub struct ArtifactsArgs {
    /// The task whose artifacts to list (its id, as `looopy run` prints it).
    pub task: looopy_protocol::ids::TaskId,
    /// Save every artifact into this directory (created if missing): files under their
    /// own name, data as `<name>.json`, datasets as JSON Lines (`<name>.jsonl`). Existing
    /// files of the same name are replaced.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Print one JSON object per artifact instead of `▣` lines.
    #[arg(long)]
    pub json: bool,
    /// SQLite database to read [default: the config file's `db`, else
    /// ~/.looopy/looopy.db]. Read-only: works while `looopy serve` writes it.
    #[arg(long, env = "LOOOPY_DB")]
    pub db: Option<PathBuf>,
    /// Config file (TOML) [default: ~/.config/looopy/config.toml when it exists].
    #[arg(long, env = "LOOOPY_CONFIG")]
    pub config: Option<PathBuf>,
    /// Ask a running server instead of reading a database, e.g. http://127.0.0.1:8080
    /// (`GET /v1/tasks/{id}/artifacts` and each artifact's content route).
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for --server.
    #[arg(long, env = "LOOOPY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

/// The variable every client command reads its bearer token from.
pub const TOKEN_ENV: &str = "LOOOPY_TOKEN";

/// The token a client sends: the flag's, else the first non-empty of the older
/// command-specific variables `old_names` (still accepted), else [`TOKEN_ENV`].
pub fn client_token(flag: Option<String>, old_names: &[&str]) -> Option<String> {
    flag.or_else(|| {
        old_names
            .iter()
            .chain(std::iter::once(&TOKEN_ENV))
            .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
    })
}

/// A duration: `15s`, `500ms`, `2m`, `1h`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (e.g. 15s, 500ms, 2m)"))?;
    let seconds = match unit.trim() {
        "" | "s" => value,
        "ms" => value / 1000.0,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        other => {
            return Err(format!(
                "unknown duration unit {other:?} (use ms, s, m or h)"
            ));
        }
    };
    if !(seconds.is_finite() && seconds > 0.0) {
        return Err(format!("{text:?} must be a positive duration"));
    }
    std::time::Duration::try_from_secs_f64(seconds)
        .map_err(|_| format!("{text:?} is too long a duration"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::parse_duration;

    #[test]
    fn durations_parse_with_their_units() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration(" 1h "), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
    }

    #[test]
    fn bad_durations_are_refused_with_a_reason_not_a_panic() {
        for bad in [
            "",
            "abc",
            "-5s",
            "0",
            "0ms",
            "5 parsecs",
            "1e400",
            "..s",
            "NaN",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        // Past what a Duration holds: an error, not an overflow panic.
        let huge = format!("{}h", "9".repeat(30));
        assert!(parse_duration(&huge).unwrap_err().contains("too long"));
    }
}
