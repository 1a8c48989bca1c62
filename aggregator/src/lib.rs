//! aggregator library (work in progress).
