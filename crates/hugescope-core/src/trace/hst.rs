//! The .hst trace format (in progress).
