//! `brokerctl`: the broker's command line, for a consumer or a provider at
//! a terminal or in a script, on the shared catalog client
//! (`catalog-client`). Installed under the name `kubectl-broker` it is a
//! kubectl plugin (`kubectl broker get offers`); see docs/cli.md.
//!
//! - [`args`]: the command line (clap), every flag with its environment
//!   variable;
//! - [`exit`]: the documented exit codes and the error that carries one;
//! - [`config`]: the config file of contexts (a catalog URL and
//!   credentials each), read and written;
//! - [`secrets`]: files holding a token, read only while private;
//! - [`target`]: which catalog and credentials a command uses (flags, else
//!   variables, else the context);
//! - [`verbose`]: `-v`'s log levels and the HTTP client logging requests;
//! - [`offer_file`]: an offer to publish, read from YAML or JSON;
//! - [`views`]: offers, plans, reservations and contracts as table rows;
//! - [`output`]: tables, JSON and YAML on stdout;
//! - [`follow`]: a `Purchase` followed in the cluster until it is Ready;
//! - [`config_commands`]: `brokerctl config …`;
//! - [`commands`]: each other subcommand, from its arguments to its output.
//!
//! Imports point down: `commands` and `config_commands` use everything
//! else; `target` uses `config` and `secrets`; `follow`, `views` and
//! `offer_file` use `exit` and `output`.

pub mod args;
pub mod commands;
pub mod config;
pub mod config_commands;
pub mod exit;
pub mod follow;
pub mod offer_file;
pub mod output;
pub mod secrets;
pub mod target;
pub mod verbose;
pub mod views;

// deploy/krew/broker.yaml checked against this crate's build.
#[cfg(test)]
mod krew_manifest;
