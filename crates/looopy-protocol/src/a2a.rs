//! A2A mapping (in progress).
