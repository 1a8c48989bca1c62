//! catalog library (work in progress).
