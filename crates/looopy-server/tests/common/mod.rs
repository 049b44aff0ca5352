//! A real server on a loopback socket with a real SQLite store and the scripted model, and
//! an SSE client that parses responses with the WHATWG decoder — all from `looopy-testkit`,
//! re-exported so each suite keeps `use common::*`.
#![allow(unused_imports)]

pub use looopy_testkit::server::{TestServer, many_deltas};
pub use looopy_testkit::sse::{SseClient, data, seq};
pub use looopy_testkit::wait::{PATIENCE, within};
