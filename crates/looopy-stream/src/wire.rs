//! Text wire protocol (in progress).
