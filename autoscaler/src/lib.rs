//! The market autoscaler: buys catalog capacity when pods wait and gives it
//! back when it sits idle, within limits in resources and in money.

pub mod decide;
pub mod explanation;
pub mod model;
pub mod scale_down;
pub mod spend;
