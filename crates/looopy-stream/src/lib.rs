//! Incremental parsers at the heart of Looopy's streaming: bytes and text arrive in
//! arbitrary chunks, and each parser turns them into events as early as it safely can.
//!
//! Every parser here is a plain state machine with `push(chunk)` and `finish()`: no I/O,
//! no allocation proportional to anything but what it must hold, and no panics on any input.
//!
//! - [`sse`]: the WHATWG Server-Sent Events decoder (bytes in, events out).
//! - [`thought`]: splits inline `<thinking>`-style tags out of model text as streamed thoughts.
//! - [`wire`]: the text wire protocol (`<think>`, `<execute>`, `<respond>`, …) for models
//!   without native tool calling, plus context assembly in both directions.
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic)
)]

pub mod sse;
pub mod thought;
pub mod wire;
