//! Shared helpers for the benchmarks: building timelines of a given logical size once, on disk.
