//! Choosing the plans to buy.

/// Nodes the exact search may visit before it settles for the best found.
pub const EXACT_NODE_LIMIT: u64 = 200_000;
