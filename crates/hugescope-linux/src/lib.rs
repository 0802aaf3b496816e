//! Real-Linux side (in progress).
