//! What Looopy's test suites share, in one dev-only crate instead of a copy per suite:
//!
//! * [`chunks`] — any chunking of an input, for the parsers' property tests (always on);
//! * [`machine`] — what a benchmark prints about the machine it ran on (always on);
//! * `wait` — bounded waits, so a bug fails a test instead of hanging it, and a "process"
//!   that dies mid-work (`run_then_crash`) (feature `wait`);
//! * `redact` — event normalisers for insta snapshots (feature `redact`);
//! * `sse` — an SSE client that decodes a response with the WHATWG decoder (feature `sse`);
//! * `oauth` — a loopback OAuth 2.1 authorization server (feature `oauth`);
//! * `services` — the machine's PostgreSQL and NATS, a schema per test (feature `services`);
//! * `server` — a real server on a loopback socket with a real SQLite store and the scripted
//!   model (feature `server`).
//!
//! Each part is behind a feature so a parser's tests do not build the server. Integration
//! tests only: a crate's unit tests would see a second copy of the crate's own types.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod chunks;
pub mod machine;
#[cfg(feature = "oauth")]
pub mod oauth;
#[cfg(feature = "redact")]
pub mod redact;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "services")]
pub mod services;
#[cfg(feature = "sse")]
pub mod sse;
#[cfg(feature = "wait")]
pub mod wait;
