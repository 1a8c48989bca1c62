//! resource-monitor library (work in progress).
