//! Giving capacity back.
