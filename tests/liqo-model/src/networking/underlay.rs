//! The network between the clusters' gateways, which the model puts in
//! place of WireGuard (the issue: "no WireGuard, a Connection becomes
//! Connected when the GatewayServer/GatewayClient endpoints and the
//! PublicKeys match"). Each gateway server listens on an address of its
//! own (a LoadBalancer Service's, `wggatewayserver_controller.go:414-431`);
//! each gateway client dials the endpoint its GatewayClient names. A
//! tunnel is up when a client dials a server's address and port and each
//! side holds the other's public key — what a WireGuard handshake needs
//! (`pkg/gateway/tunnel/wireguard/publickeys_controller.go:82`,
//! `configureDevice`). Nothing else passes between the clusters: what
//! each side knows, it read from its own API server.
//!
//! It is process-wide, like a network: test API servers in one process
//! reach each other's gateways and no others (addresses are unique).

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use tokio::sync::watch;

/// One gateway's side of a tunnel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Side {
    /// This gateway's public key.
    pub key: Vec<u8>,
    /// The peer's public key, from a PublicKey object, once there is one.
    pub peer: Option<Vec<u8>>,
}

#[derive(Default)]
struct State {
    /// Gateway (its tag) → its address, once given one.
    addresses: HashMap<String, String>,
    /// `address:port` → the server listening there (tag, side).
    servers: HashMap<String, (String, Side)>,
    /// Client tag → (`address:port` dialled, side).
    clients: HashMap<String, (String, Side)>,
}

struct Underlay {
    state: Mutex<State>,
    changed: watch::Sender<u64>,
}

fn underlay() -> &'static Underlay {
    static UNDERLAY: OnceLock<Underlay> = OnceLock::new();
    UNDERLAY.get_or_init(|| Underlay {
        state: Mutex::new(State::default()),
        changed: watch::channel(0).0,
    })
}

fn state() -> std::sync::MutexGuard<'static, State> {
    underlay().state.lock().unwrap_or_else(|e| e.into_inner())
}

fn changed() {
    underlay().changed.send_modify(|n| *n = n.wrapping_add(1));
}

/// A receiver told of every change, so the gateways of each cluster look
/// again at their tunnels (a real gateway learns of its peer by packets).
pub fn subscribe() -> watch::Receiver<u64> {
    underlay().changed.subscribe()
}

/// The address of the gateway `tag`, the same for its life: one of
/// `100.64.0.0/10` (shared address space, so never a test's pod CIDR).
pub fn address_of(tag: &str) -> String {
    let mut state = state();
    let next = state.addresses.len() as u32 + 1;
    state
        .addresses
        .entry(tag.to_string())
        .or_insert_with(|| {
            let ip = std::net::Ipv4Addr::from((100u32 << 24 | 64 << 16) + next);
            ip.to_string()
        })
        .clone()
}

/// Server `tag` listens on `at` (`address:port`) with `side`.
pub fn listen(tag: &str, at: &str, side: Side) {
    let mut state = state();
    let entry = (tag.to_string(), side);
    if state.servers.get(at) != Some(&entry) {
        state.servers.retain(|_, (t, _)| t != tag);
        state.servers.insert(at.to_string(), entry);
        drop(state);
        changed();
    }
}

/// Client `tag` dials `to` (`address:port`) with `side`.
pub fn dial(tag: &str, to: &str, side: Side) {
    let mut state = state();
    let entry = (to.to_string(), side);
    if state.clients.get(tag) != Some(&entry) {
        state.clients.insert(tag.to_string(), entry);
        drop(state);
        changed();
    }
}

/// Gateway `tag` is gone: it neither listens nor dials.
pub fn forget(tag: &str) {
    let mut state = state();
    let before = (state.servers.len(), state.clients.len());
    state.servers.retain(|_, (t, _)| t != tag);
    state.clients.remove(tag);
    if before != (state.servers.len(), state.clients.len()) {
        drop(state);
        changed();
    }
}

fn matched(server: &Side, client: &Side) -> bool {
    client.peer.as_ref() == Some(&server.key) && server.peer.as_ref() == Some(&client.key)
}

/// Whether gateway `tag` (server or client) has a tunnel up.
pub fn connected(tag: &str) -> bool {
    let state = state();
    if let Some((to, client)) = state.clients.get(tag) {
        return state
            .servers
            .get(to)
            .is_some_and(|(_, server)| matched(server, client));
    }
    let Some((at, server)) = state.servers.iter().find(|(_, (t, _))| t == tag) else {
        return false;
    };
    let server = &server.1;
    state
        .clients
        .values()
        .any(|(to, client)| to == at && matched(server, client))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(key: &[u8], peer: Option<&[u8]>) -> Side {
        Side {
            key: key.to_vec(),
            peer: peer.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn a_tunnel_needs_the_address_and_both_keys() {
        let (s, c) = ("t1/server", "t1/client");
        let at = format!("{}:51840", address_of(s));
        listen(s, &at, side(b"S", Some(b"C")));
        dial(c, "100.127.0.1:51840", side(b"C", Some(b"S")));
        assert!(!connected(c), "wrong address");
        dial(c, &at, side(b"C", Some(b"X")));
        assert!(!connected(c) && !connected(s), "wrong key");
        dial(c, &at, side(b"C", Some(b"S")));
        assert!(connected(c) && connected(s));
        forget(s);
        assert!(!connected(c));
    }
}
