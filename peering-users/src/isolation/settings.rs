//! The isolation flags (each with a `PEERING_USER_CONTROLLER_*` variable),
//! checked into [`render::Settings`].

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use controller_core::liqo::TENANT_NAMESPACE_PREFIX;
use ipnet::Ipv4Net;

use super::prober::ProbeSettings;
use super::render::{self, Settings};

/// The flags.
#[derive(Debug, Clone, clap::Args)]
pub struct IsolationArgs {
    /// Keep consumers apart with NetworkPolicies: each consumer's offloaded namespaces admit only that consumer's pods (here and in its other clusters), DNS and the opt-ins below; false renders nothing and removes what was rendered.
    #[arg(long, env = "PEERING_USER_CONTROLLER_ISOLATION", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub isolation: bool,

    /// The provider's own namespaces that no consumer may reach, comma-separated (Liqo's own, kube-system and the DNS namespace are refused: Liqo's gateway and DNS must stay reachable).
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_PROTECTED_NAMESPACES",
        value_name = "NAMESPACES",
        value_delimiter = ','
    )]
    pub isolation_protected_namespaces: Vec<String>,

    /// Whether consumers' pods may reach the internet (every IPv4 address but --isolation-internal-cidrs and the consumers' ranges).
    #[arg(long, env = "PEERING_USER_CONTROLLER_ISOLATION_INTERNET_EGRESS", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub isolation_internet_egress: bool,

    /// Ranges never counted as the internet, comma-separated (the cluster's networks and the cloud's metadata address must be in them).
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_INTERNAL_CIDRS",
        value_name = "CIDRS",
        value_delimiter = ',',
        default_value = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,169.254.0.0/16,127.0.0.0/8"
    )]
    pub isolation_internal_cidrs: Vec<String>,

    /// Namespaces whose pods may reach consumers' pods (the provider's ingress controller, its monitoring), as namespace labels `key=value[,key=value]`; several sets separated by `;`.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_INGRESS_FROM",
        value_name = "LABELS",
        value_delimiter = ';'
    )]
    pub isolation_ingress_from: Vec<String>,

    /// Whether a consumer's pods here may reach its pods on other providers directly, as Liqo routes them when its networking.denyDirectConnections is false (its default): each address the consumer's virtual kubelet names in a ShadowEndpointSlice's liqo.io/direct-connections-data annotation, remapped by this provider's Configuration for that provider, is admitted as a /32, both ways. Refused: addresses outside that provider's pod CIDR, providers this cluster has no Configuration for, clusters that buy here too (their networks hold other buyers' pods), and past 1024 addresses per consumer.
    #[arg(long, env = "PEERING_USER_CONTROLLER_ISOLATION_DIRECT_CONNECTIONS", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub isolation_direct_connections: bool,

    /// The namespace of the cluster DNS consumers' pods may query (port 53).
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_DNS_NAMESPACE",
        value_name = "NAMESPACE",
        default_value = "kube-system"
    )]
    pub isolation_dns_namespace: String,

    /// The cluster DNS pods' labels, `key=value[,key=value]`.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_DNS_POD_LABELS",
        value_name = "LABELS",
        default_value = "k8s-app=kube-dns"
    )]
    pub isolation_dns_pod_labels: String,

    /// Time between runs of the isolation probe (a pod pair in --isolation-probe-namespaces that shows whether the CNI enforces the policies; its verdict is the level told to the catalog); 0s: never run.
    #[arg(long, env = "PEERING_USER_CONTROLLER_ISOLATION_PROBE_INTERVAL", value_name = "DURATION", default_value = "6h", value_parser = edge::duration::parse)]
    pub isolation_probe_interval: Duration,

    /// The probe's image: busybox's sh, httpd and wget.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_PROBE_IMAGE",
        value_name = "IMAGE",
        default_value = "busybox:1.36"
    )]
    pub isolation_probe_image: String,

    /// Longest one probe run takes (image pulls included); past it the run is inconclusive.
    #[arg(long, env = "PEERING_USER_CONTROLLER_ISOLATION_PROBE_TIMEOUT", value_name = "DURATION", default_value = "2m", value_parser = edge::duration::parse)]
    pub isolation_probe_timeout: Duration,

    /// The probe's two namespaces (made by the controller, labelled as two consumers'): the server's and the stranger's.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_PROBE_NAMESPACES",
        value_name = "A,B",
        value_delimiter = ',',
        num_args = 1..,
        default_value = "liqo-broker-probe-a,liqo-broker-probe-b"
    )]
    pub isolation_probe_namespaces: Vec<String>,

    /// The controller's own ServiceAccount, bound the probe's ClusterRole (liqo-broker-isolation-probe) in the probe's namespaces.
    #[arg(
        long,
        env = "PEERING_USER_CONTROLLER_ISOLATION_PROBE_SERVICE_ACCOUNT",
        value_name = "NAME",
        default_value = "peering-user-controller"
    )]
    pub isolation_probe_service_account: String,

    /// Time between full passes when nothing changed (changes to namespaces, Configurations, NetworkPolicies, NamespaceOffloadings and annotated ShadowEndpointSlices start a pass at once).
    #[arg(long, env = "PEERING_USER_CONTROLLER_ISOLATION_RESYNC", value_name = "DURATION", default_value = "5m", value_parser = edge::duration::parse)]
    pub isolation_resync: Duration,
}

/// A flag that cannot be used, named.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IsolationFlagError {
    #[error("--isolation-protected-namespaces: {0:?} cannot be protected: {1}")]
    Protected(String, &'static str),
    #[error("--isolation-internal-cidrs: {0:?} is not an IPv4 CIDR")]
    Cidr(String),
    #[error("{flag}: {text:?} is not a list of key=value labels")]
    Labels { flag: &'static str, text: String },
    #[error("--isolation-resync must be positive")]
    Resync,
    #[error("--isolation-probe-namespaces: two different namespaces, the server's and the stranger's, not {0:?}")]
    ProbeNamespaces(Vec<String>),
    #[error("--isolation-probe-timeout must be positive")]
    ProbeTimeout,
}

impl IsolationArgs {
    /// The settings, or the first flag that cannot be used. `liqo_namespace`
    /// is Liqo's namespace (never protected: its gateways and controllers
    /// must stay reachable).
    pub fn settings(&self, liqo_namespace: &str) -> Result<Settings, IsolationFlagError> {
        if self.isolation_resync.is_zero() {
            return Err(IsolationFlagError::Resync);
        }
        let mut protected = BTreeSet::new();
        for ns in &self.isolation_protected_namespaces {
            let ns = ns.trim();
            if ns.is_empty() {
                continue;
            }
            let why = if ns == liqo_namespace {
                Some("it is Liqo's namespace (--liqo-namespace)")
            } else if ns.starts_with(TENANT_NAMESPACE_PREFIX) {
                Some("it is a Liqo tenant namespace, where the consumer's gateway runs")
            } else if ns == "kube-system" || ns == self.isolation_dns_namespace {
                Some("consumers' pods need its DNS")
            } else {
                None
            };
            if let Some(why) = why {
                return Err(IsolationFlagError::Protected(ns.to_string(), why));
            }
            protected.insert(ns.to_string());
        }
        let internal = self
            .isolation_internal_cidrs
            .iter()
            .map(|t| t.trim())
            .filter(|t| !t.is_empty())
            .map(|t| {
                t.parse::<Ipv4Net>()
                    .map(|n| n.trunc())
                    .map_err(|_| IsolationFlagError::Cidr(t.to_string()))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let ingress_from = self
            .isolation_ingress_from
            .iter()
            .filter(|t| !t.trim().is_empty())
            .map(|t| labels("--isolation-ingress-from", t))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(render::Settings {
            enabled: self.isolation,
            protected,
            internet_egress: self.isolation_internet_egress,
            internal,
            ingress_from,
            dns_namespace: self.isolation_dns_namespace.clone(),
            dns_pod_labels: labels("--isolation-dns-pod-labels", &self.isolation_dns_pod_labels)?,
            direct_connections: self.isolation_direct_connections,
            // Not a flag: the caller knows it from the catalog credentials.
            cluster_id: String::new(),
        })
    }
}

impl IsolationArgs {
    /// The probe's settings, or the first flag that cannot be used;
    /// `own_namespace` is the controller's (its ServiceAccount's).
    pub fn probe(&self, own_namespace: &str) -> Result<ProbeSettings, IsolationFlagError> {
        let ns: Vec<String> = self
            .isolation_probe_namespaces
            .iter()
            .map(|n| n.trim().to_string())
            .collect();
        match ns.as_slice() {
            [a, b] if !a.is_empty() && !b.is_empty() && a != b => {}
            _ => return Err(IsolationFlagError::ProbeNamespaces(ns)),
        }
        if self.isolation_probe_timeout.is_zero() {
            return Err(IsolationFlagError::ProbeTimeout);
        }
        Ok(ProbeSettings {
            namespaces: (ns[0].clone(), ns[1].clone()),
            image: self.isolation_probe_image.clone(),
            timeout: self.isolation_probe_timeout,
            interval: (self.isolation && !self.isolation_probe_interval.is_zero())
                .then_some(self.isolation_probe_interval),
            account: (
                own_namespace.to_string(),
                self.isolation_probe_service_account.clone(),
            ),
        })
    }
}

/// `key=value[,key=value]`, at least one; keys and values as Kubernetes
/// allows them is the API server's to check (a bad one fails the write,
/// which is logged).
fn labels(flag: &'static str, text: &str) -> Result<BTreeMap<String, String>, IsolationFlagError> {
    let bad = || IsolationFlagError::Labels {
        flag,
        text: text.to_string(),
    };
    let mut out = BTreeMap::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').ok_or_else(bad)?;
        let (k, v) = (k.trim(), v.trim());
        if k.is_empty() || v.contains('=') || out.insert(k.to_string(), v.to_string()).is_some() {
            return Err(bad());
        }
    }
    if out.is_empty() {
        return Err(bad());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: IsolationArgs,
    }

    fn parse(extra: &[&str]) -> IsolationArgs {
        let mut argv = vec!["x"];
        argv.extend_from_slice(extra);
        Cli::try_parse_from(argv).unwrap().args
    }

    #[test]
    fn defaults_isolate_with_internet_and_dns() {
        let s = parse(&[]).settings("liqo").unwrap();
        assert!(s.internet_egress);
        assert!(s.protected.is_empty());
        assert_eq!(s.internal, render::default_internal());
        assert_eq!(s.dns_namespace, "kube-system");
        assert_eq!(s.dns_pod_labels["k8s-app"], "kube-dns");
        assert!(parse(&[]).isolation);
        assert!(s.direct_connections);
        assert!(
            !parse(&["--isolation-direct-connections", "false"])
                .settings("liqo")
                .unwrap()
                .direct_connections
        );
    }

    #[test]
    fn liqos_namespaces_and_dns_cannot_be_protected() {
        for ns in ["liqo", "liqo-tenant-abc", "kube-system"] {
            let e = parse(&[
                "--isolation-protected-namespaces",
                &format!("payments,{ns}"),
            ])
            .settings("liqo")
            .unwrap_err();
            assert!(
                matches!(e, IsolationFlagError::Protected(ref n, _) if n == ns),
                "{e}"
            );
            assert!(e.to_string().contains("--isolation-protected-namespaces"));
        }
        let s = parse(&["--isolation-protected-namespaces", "payments, billing"])
            .settings("liqo")
            .unwrap();
        assert_eq!(s.protected.len(), 2);
    }

    #[test]
    fn the_probe_needs_two_namespaces_and_runs_only_with_isolation() {
        let p = parse(&[]).probe("liqo").unwrap();
        assert_eq!(p.namespaces.0, "liqo-broker-probe-a");
        assert_eq!(p.interval, Some(Duration::from_secs(6 * 3600)));
        assert_eq!(
            parse(&["--isolation-probe-interval", "0s"])
                .probe("liqo")
                .unwrap()
                .interval,
            None
        );
        assert_eq!(
            parse(&["--isolation", "false"])
                .probe("liqo")
                .unwrap()
                .interval,
            None
        );
        for bad in ["a", "a,a", "a,b,c"] {
            let e = parse(&["--isolation-probe-namespaces", bad])
                .probe("liqo")
                .unwrap_err();
            assert!(
                e.to_string().starts_with("--isolation-probe-namespaces"),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_cidrs_and_labels_are_named() {
        let e = parse(&["--isolation-internal-cidrs", "10.0.0.0/8,fd00::/8"])
            .settings("liqo")
            .unwrap_err();
        assert_eq!(e, IsolationFlagError::Cidr("fd00::/8".into()));
        let e = parse(&["--isolation-ingress-from", "team"])
            .settings("liqo")
            .unwrap_err();
        assert!(e.to_string().starts_with("--isolation-ingress-from"), "{e}");
        let s = parse(&[
            "--isolation-ingress-from",
            "kubernetes.io/metadata.name=ingress-nginx;role=monitoring,tier=ops",
        ])
        .settings("liqo")
        .unwrap();
        assert_eq!(s.ingress_from.len(), 2);
        assert_eq!(s.ingress_from[1]["tier"], "ops");
        let e = parse(&["--isolation-dns-pod-labels", "a=b,a=c"])
            .settings("liqo")
            .unwrap_err();
        assert!(e.to_string().contains("--isolation-dns-pod-labels"));
    }
}
