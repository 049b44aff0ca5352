//! Thought splitter (in progress).
