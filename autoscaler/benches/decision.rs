//! One decision round: 1,000 waiting pods × 1,000 offers.
fn main() {}
