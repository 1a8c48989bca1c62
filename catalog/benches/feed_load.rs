//! Feed load benchmark (being written).
fn main() {}
