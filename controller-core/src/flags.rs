//! The flags every controller shares — the cluster's kubeconfig, the probe
//! port's and the Lease election's — declared once, and flattened into each binary's own flags
//! (`#[command(flatten)]`) under the environment variables that binary has
//! always had: [`Prefixed`] gives every flag of a group the variable
//! `<PREFIX>_<FLAG>` (`--lease-name` in the orchestrator:
//! `ORCHESTRATOR_LEASE_NAME`), since clap's derived `env` names are fixed
//! at compile time.
//!
//! [`ProbeArgs::spawn`] serves the probe port on its flag.
//!
//! What one binary says differently (a default, a help text) it sets on the
//! flag by its id with clap's `mut_arg`, so each `--help` reads as before.

use std::marker::PhantomData;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::Command;
use clap::{ArgMatches, Args, FromArgMatches, Id};
use edge::probe::{HttpError, Probes};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::lease::LeaseTimes;

/// The probe port (served by `edge::probe`).
#[derive(Debug, Clone, clap::Args)]
pub struct ProbeArgs {
    /// Serve /healthz, /readyz and /metrics on this address.
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:8082")]
    pub http_listen: SocketAddr,
}

impl ProbeArgs {
    /// Serve the probe port on `--http-listen` until `stop` is cancelled
    /// (then wait for it with `edge::probe::join`).
    pub async fn spawn<P: Probes>(
        &self,
        role: Option<&str>,
        probes: P,
        stop: &CancellationToken,
    ) -> Result<JoinHandle<Result<(), HttpError>>, HttpError> {
        edge::probe::spawn(
            self.http_listen,
            role,
            probes,
            stop.clone().cancelled_owned(),
        )
        .await
    }
}

/// Which cluster the controller works on.
#[derive(Debug, Clone, clap::Args)]
pub struct KubeArgs {
    /// Kubeconfig file [default: in-cluster, else $KUBECONFIG or ~/.kube/config].
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// Context of the kubeconfig [default: its current context].
    #[arg(long, value_name = "NAME")]
    pub kube_context: Option<String>,
}

impl KubeArgs {
    /// A client of that cluster ([`crate::kubeconfig::client`]).
    pub async fn client(&self) -> Result<kube::Client, crate::kubeconfig::ClientError> {
        crate::kubeconfig::client(self.kubeconfig.as_deref(), self.kube_context.as_deref()).await
    }

    /// A client of that cluster that does not retry 429, 503 and 504
    /// ([`crate::kubeconfig::client_without_retry`]): for evictions.
    pub async fn client_without_retry(
        &self,
    ) -> Result<kube::Client, crate::kubeconfig::ClientError> {
        crate::kubeconfig::client_without_retry(
            self.kubeconfig.as_deref(),
            self.kube_context.as_deref(),
        )
        .await
    }
}

/// Whether replicas elect a leader, and on which Lease.
#[derive(Debug, Clone, clap::Args)]
pub struct ElectionArgs {
    /// Elect one leader among replicas on a coordination.k8s.io Lease (false: this process always writes).
    #[arg(long, value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Name of the Lease.
    #[arg(long, value_name = "NAME")]
    pub lease_name: Option<String>,

    /// Namespace of the Lease [default: $POD_NAMESPACE, else the kubeconfig's namespace].
    #[arg(long, value_name = "NAMESPACE")]
    pub lease_namespace: Option<String>,
}

/// How long the Lease holds and how often it is renewed.
#[derive(Debug, Clone, clap::Args)]
pub struct LeaseTimesArgs {
    /// How long a Lease not renewed stays held.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = edge::duration::parse)]
    pub lease_duration: Duration,

    /// The leader stops writing when it could not renew for this long (less than the lease duration).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = edge::duration::parse)]
    pub lease_renew_deadline: Duration,

    /// How often candidates try to take the Lease and the leader renews it (less than the renew deadline).
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = edge::duration::parse)]
    pub lease_retry: Duration,
}

impl LeaseTimesArgs {
    /// The times as the election takes them (not yet checked: see
    /// [`LeaseTimes::validate`]).
    pub fn times(&self) -> LeaseTimes {
        LeaseTimes {
            duration: self.lease_duration,
            renew_deadline: self.lease_renew_deadline,
            retry: self.lease_retry,
        }
    }
}

/// The prefix of a binary's environment variables (`ORCHESTRATOR`).
pub trait EnvPrefix {
    const PREFIX: &'static str;
}

/// The flags of `T`, each with the environment variable
/// `<P::PREFIX>_<ID>` (the flag's id — its field's name — in capitals).
/// Dereferences to `T`.
pub struct Prefixed<T, P> {
    flags: T,
    prefix: PhantomData<fn() -> P>,
}

impl<T, P> Prefixed<T, P> {
    fn new(flags: T) -> Self {
        Self {
            flags,
            prefix: PhantomData,
        }
    }
}

/// `augment` (one of `T`'s) adds `T`'s flags to `cmd`; each flag it added
/// gets its variable.
fn with_env<P: EnvPrefix>(cmd: Command, augment: fn(Command) -> Command) -> Command {
    let before: Vec<Id> = cmd.get_arguments().map(|a| a.get_id().clone()).collect();
    let cmd = augment(cmd);
    let added: Vec<Id> = cmd
        .get_arguments()
        .map(|a| a.get_id().clone())
        .filter(|id| !before.contains(id))
        .collect();
    added.into_iter().fold(cmd, |cmd, id| {
        let env = format!("{}_{}", P::PREFIX, id.as_str().to_ascii_uppercase());
        cmd.mut_arg(id, |arg| arg.env(env))
    })
}

impl<T: Args, P: EnvPrefix> Args for Prefixed<T, P> {
    fn group_id() -> Option<Id> {
        T::group_id()
    }

    fn augment_args(cmd: Command) -> Command {
        with_env::<P>(cmd, T::augment_args)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        with_env::<P>(cmd, T::augment_args_for_update)
    }
}

impl<T: FromArgMatches, P> FromArgMatches for Prefixed<T, P> {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches(matches).map(Self::new)
    }

    fn from_arg_matches_mut(matches: &mut ArgMatches) -> Result<Self, clap::Error> {
        T::from_arg_matches_mut(matches).map(Self::new)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.flags.update_from_arg_matches(matches)
    }

    fn update_from_arg_matches_mut(&mut self, matches: &mut ArgMatches) -> Result<(), clap::Error> {
        self.flags.update_from_arg_matches_mut(matches)
    }
}

impl<T, P> std::ops::Deref for Prefixed<T, P> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.flags
    }
}

impl<T: Clone, P> Clone for Prefixed<T, P> {
    fn clone(&self) -> Self {
        Self::new(self.flags.clone())
    }
}

impl<T: std::fmt::Debug, P> std::fmt::Debug for Prefixed<T, P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.flags.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};

    use super::*;

    struct Env;

    impl EnvPrefix for Env {
        const PREFIX: &'static str = "X_Y";
    }

    /// A binary with a flag of its own between two shared groups, and one
    /// shared flag's default changed.
    #[derive(Debug, Parser)]
    #[command(mut_arg("lease_name", |a| a.default_value("x")))]
    struct Cli {
        #[command(flatten)]
        election: Prefixed<ElectionArgs, Env>,
        /// Mine.
        #[arg(long, env = "MINE")]
        mine: Option<String>,
        #[command(flatten)]
        times: Prefixed<LeaseTimesArgs, Env>,
    }

    #[test]
    fn every_shared_flag_gets_the_binarys_variable_and_keeps_its_place() {
        let cmd = Cli::command();
        // `--help` lists flags in display order (`mut_arg` moves a flag to
        // the end of the list, not of the help).
        let mut args: Vec<_> = cmd.get_arguments().collect();
        args.sort_by_key(|a| a.get_display_order());
        let flags: Vec<(String, Option<String>)> = args
            .into_iter()
            .map(|a| {
                let env = a.get_env().map(|e| e.to_string_lossy().into_owned());
                (a.get_id().to_string(), env)
            })
            .collect();
        let expected: Vec<(String, Option<String>)> = [
            ("leader_elect", Some("X_Y_LEADER_ELECT")),
            ("lease_name", Some("X_Y_LEASE_NAME")),
            ("lease_namespace", Some("X_Y_LEASE_NAMESPACE")),
            ("mine", Some("MINE")),
            ("lease_duration", Some("X_Y_LEASE_DURATION")),
            ("lease_renew_deadline", Some("X_Y_LEASE_RENEW_DEADLINE")),
            ("lease_retry", Some("X_Y_LEASE_RETRY")),
        ]
        .into_iter()
        .map(|(id, env)| (id.to_string(), env.map(str::to_string)))
        .collect();
        assert_eq!(flags, expected);

        let cli = Cli::try_parse_from(["b", "--leader-elect", "false", "--lease-retry", "1s"])
            .expect("parses");
        assert!(!cli.election.leader_elect);
        assert_eq!(cli.election.lease_name.as_deref(), Some("x"));
        assert_eq!(cli.times.times().retry, Duration::from_secs(1));
        assert_eq!(cli.times.times().duration, Duration::from_secs(15));
    }
}
