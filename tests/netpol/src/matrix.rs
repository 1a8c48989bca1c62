//! Reachability of every ordered pod pair, as upstream's e2e keeps it
//! (`test/e2e/network/netpol/reachability.go`, `truthtable.go`): an
//! expected matrix is written by hand (a default plus overrides), an
//! observed one comes from [`Matrix::observe`], and a mismatch prints both
//! as truth tables (`.` allowed, `X` denied) with the comparison.

use std::fmt;

use crate::policy::{allowed, Endpoint, World};

/// Which pods an override applies to, as upstream's `Peer`: `None` matches
/// every namespace (pod name).
#[derive(Debug, Clone, Copy, Default)]
pub struct Peer<'a> {
    pub namespace: Option<&'a str>,
    pub pod: Option<&'a str>,
}

impl<'a> Peer<'a> {
    /// Every pod.
    pub fn any() -> Self {
        Peer::default()
    }

    /// Every pod of `namespace`.
    pub fn namespace(namespace: &'a str) -> Self {
        Peer {
            namespace: Some(namespace),
            pod: None,
        }
    }

    /// The pod `namespace/pod`.
    pub fn pod(namespace: &'a str, pod: &'a str) -> Self {
        Peer {
            namespace: Some(namespace),
            pod: Some(pod),
        }
    }

    fn matches(&self, pod: &str) -> bool {
        let (namespace, name) = pod.split_once('/').unwrap_or(("", pod));
        self.namespace.is_none_or(|n| n == namespace) && self.pod.is_none_or(|p| p == name)
    }
}

/// `values[from][to]` over `pods` (`namespace/name` strings), in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pods: Vec<String>,
    values: Vec<Vec<bool>>,
}

impl Matrix {
    /// Every pair set to `default` (upstream's `NewReachability`).
    pub fn new(pods: &[&str], default: bool) -> Self {
        Matrix {
            pods: pods.iter().map(|p| (*p).to_owned()).collect(),
            values: vec![vec![default; pods.len()]; pods.len()],
        }
    }

    /// What the evaluator says for every pair on `port`/`protocol`.
    pub fn observe(world: &World, pods: &[&str], port: u16, protocol: &str) -> Self {
        let endpoint = |pod: &str| {
            let (namespace, name) = pod.split_once('/').unwrap_or(("", pod));
            Endpoint::pod(namespace, name)
        };
        let mut matrix = Matrix::new(pods, false);
        for (i, from) in pods.iter().enumerate() {
            for (j, to) in pods.iter().enumerate() {
                matrix.values[i][j] =
                    allowed(world, &endpoint(from), &endpoint(to), port, protocol);
            }
        }
        matrix
    }

    pub fn pods(&self) -> Vec<&str> {
        self.pods.iter().map(String::as_str).collect()
    }

    fn index(&self, pod: &str) -> usize {
        match self.pods.iter().position(|p| p == pod) {
            Some(i) => i,
            None => panic!("pod {pod} is not in the matrix {:?}", self.pods),
        }
    }

    pub fn get(&self, from: &str, to: &str) -> bool {
        self.values[self.index(from)][self.index(to)]
    }

    /// One pair (upstream's `Expect`). Panics on a pod not in the matrix.
    pub fn expect(&mut self, from: &str, to: &str, connected: bool) {
        let (i, j) = (self.index(from), self.index(to));
        self.values[i][j] = connected;
    }

    /// Everything into `to` (upstream's `ExpectAllIngress`).
    pub fn expect_all_ingress(&mut self, to: &str, connected: bool) {
        let j = self.index(to);
        for row in &mut self.values {
            row[j] = connected;
        }
    }

    /// Everything out of `from` (upstream's `ExpectAllEgress`).
    pub fn expect_all_egress(&mut self, from: &str, connected: bool) {
        let i = self.index(from);
        self.values[i].fill(connected);
    }

    /// Every pair whose ends match `from` and `to` (upstream's `ExpectPeer`).
    pub fn expect_peer(&mut self, from: Peer, to: Peer, connected: bool) {
        for i in 0..self.pods.len() {
            for j in 0..self.pods.len() {
                if from.matches(&self.pods[i]) && to.matches(&self.pods[j]) {
                    self.values[i][j] = connected;
                }
            }
        }
    }

    /// The pairs where `self` and `other` differ, loopback ignored as
    /// upstream does (`ignoreLoopback`). Panics if the pods differ.
    pub fn mismatches(&self, other: &Matrix) -> Vec<(String, String)> {
        assert_eq!(self.pods, other.pods, "matrices over different pods");
        let mut out = Vec::new();
        for (i, from) in self.pods.iter().enumerate() {
            for (j, to) in self.pods.iter().enumerate() {
                if i != j && self.values[i][j] != other.values[i][j] {
                    out.push((from.clone(), to.clone()));
                }
            }
        }
        out
    }

    /// `.` where `self` and `other` agree, `X` where they differ (upstream's
    /// `Compare`).
    pub fn compare(&self, other: &Matrix) -> Matrix {
        assert_eq!(self.pods, other.pods, "matrices over different pods");
        let values = self
            .values
            .iter()
            .zip(&other.values)
            .map(|(a, b)| a.iter().zip(b).map(|(x, y)| x == y).collect())
            .collect();
        Matrix {
            pods: self.pods.clone(),
            values,
        }
    }
}

/// The truth table as upstream's `PrettyPrint`: a `-` corner, then the
/// destinations; one line per source. Columns are padded with spaces where
/// upstream separates them with tabs, which test runners' captured output
/// may not keep.
impl fmt::Display for Matrix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.pods.iter().map(String::len).max().unwrap_or(1) + 1;
        write!(f, "{:<width$}", "-")?;
        for to in &self.pods {
            write!(f, "{to:<width$}")?;
        }
        for (from, row) in self.pods.iter().zip(&self.values) {
            write!(f, "\n{from:<width$}")?;
            for value in row {
                write!(f, "{:<width$}", if *value { "." } else { "X" })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{Matrix, Peer};

    #[test]
    fn overrides_and_printing() {
        let mut m = Matrix::new(&["x/a", "x/b", "y/a"], true);
        m.expect_peer(Peer::any(), Peer::namespace("x"), false);
        m.expect("y/a", "x/b", true);
        m.expect_all_egress("y/a", false);
        m.expect_all_ingress("y/a", false);
        m.expect_peer(Peer::pod("x", "a"), Peer::pod("y", "a"), true);
        assert_eq!(
            m.to_string(),
            "-   x/a x/b y/a \nx/a X   X   .   \nx/b X   X   X   \ny/a X   X   X   "
        );
        let mut other = m.clone();
        other.expect("x/a", "x/a", true);
        assert!(m.mismatches(&other).is_empty(), "loopback is ignored");
        other.expect("x/b", "x/a", true);
        assert_eq!(
            m.mismatches(&other),
            vec![("x/b".to_owned(), "x/a".to_owned())]
        );
        assert!(!m.compare(&other).get("x/b", "x/a"));
    }
}
