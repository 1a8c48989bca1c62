//! The duration grammar of the catalog's flags: the project's one grammar
//! ([`edge::duration`]: `500ms`, `5s`, `2m`, `1h 30m`, `7d`, or bare
//! seconds), re-exported at the bottom of the crate so that feature configs
//! need not import the top-level config module.

pub use edge::duration::parse as parse_duration;
