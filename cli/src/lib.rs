//! `brokerctl`: the broker's command line, for a consumer or a provider at
//! a terminal or in a script, on the shared catalog client
//! (`catalog-client`). Installed under the name `kubectl-broker` it is a
//! kubectl plugin (`kubectl broker offers list`); see docs/cli.md.
//!
//! - [`args`]: the command line (clap), every flag with its environment
//!   variable;
//! - [`exit`]: the documented exit codes and the error that carries one;
//! - [`offer_file`]: an offer to publish, read from YAML or JSON;
//! - [`views`]: offers, plans, reservations and contracts as table rows;
//! - [`output`]: tables, JSON and YAML on stdout;
//! - [`follow`]: a `Purchase` followed in the cluster until it is Ready;
//! - [`commands`]: each subcommand, from its arguments to its output.
//!
//! Imports point down: `commands` uses everything else; `follow`, `views`
//! and `offer_file` use `exit` and `output`.

pub mod args;
pub mod commands;
pub mod exit;
pub mod follow;
pub mod offer_file;
pub mod output;
pub mod views;
