//! SSE decoder (in progress).
