//! The market autoscaler: buys catalog capacity when pods wait and gives it
//! back when it sits idle, within limits in resources and in money.

pub mod act;
pub mod config;
pub mod context;
pub mod controller;
pub mod decide;
pub mod events;
pub mod explain;
pub mod explanation;
pub mod failpoint;
pub mod give_back;
pub mod http;
pub mod metrics;
pub mod model;
pub mod observe;
pub mod observe_catalog;
pub mod round;
pub mod scale_down;
pub mod spend;
pub mod status;
