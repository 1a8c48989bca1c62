//! provider-agent library (work in progress).
