//! Built-in workloads (in progress).
