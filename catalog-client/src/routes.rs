//! The catalog's paths, relative to its base URL. The server declares them
//! in `catalog/src/routes.rs`; outside `catalog/` and the end-to-end tests,
//! this is the only place that spells them, so a moved route is one edit.

/// `POST`: a provider's peering credentials for a token.
pub const AUTHENTICATE: &str = "authenticate";
/// `POST`: the administrator secret for an admin token.
pub const AUTHENTICATE_ADMIN: &str = "authenticate/admin";
/// `GET`: every provider, with whether it is disabled (admins).
pub const ADMIN_PROVIDERS: &str = "admin/providers";
/// `GET`: every offer (public).
pub const OFFERS: &str = "offers";
/// `GET`: the WebSocket feed of the offers.
pub const SUBSCRIBE: &str = "subscribe";
/// `GET`: the caller's contracts (`?active=true`: only the active ones).
pub const CONTRACTS: &str = "contracts";
/// `GET`: the caller's contract changes, streamed (NDJSON; `?since=SEQ`
/// resumes, `?active=true` filters the snapshot).
pub const CONTRACT_CHANGES: &str = "contract-changes";
/// `PUT`: the provider reports its Liqo enforcement level.
pub const PROVIDER_ENFORCEMENT: &str = "provider/enforcement";
/// `PUT`: the provider reports its tenant-isolation level.
pub const PROVIDER_ISOLATION: &str = "provider/isolation";
/// `POST`: hold one unit of a plan.
pub const RESERVATIONS: &str = "reservations";
/// `GET`: the caller's service instances (OSB provisionings), with their
/// state and last operation.
pub const SERVICE_INSTANCES: &str = "service-instances";

/// `GET`/`POST`/`DELETE` one offer.
pub fn offer(id: &str) -> String {
    format!("offer/{}", segment(id))
}

/// `GET` one contract (its consumer sees the credentials).
pub fn contract(id: &str) -> String {
    format!("{CONTRACTS}/{}", segment(id))
}

/// `PUT`: the consumer reports where a contract is.
pub fn contract_state(id: &str) -> String {
    format!("{CONTRACTS}/{}/state", segment(id))
}

/// `PUT`: the provider attaches a contract's peering-user kubeconfig.
pub fn contract_peering(id: &str) -> String {
    format!("provider/{CONTRACTS}/{}/peering", segment(id))
}

/// `PUT`: the provider reports the state of the service a contract bought.
pub fn contract_service(id: &str) -> String {
    format!("provider/{CONTRACTS}/{}/service", segment(id))
}

/// `GET`: the customer's peering kubeconfig sent with a service contract's
/// provisioning (its provider).
pub fn contract_customer_peering(id: &str) -> String {
    format!("provider/{CONTRACTS}/{}/customer-peering", segment(id))
}

/// `GET`: a service contract's bindings waiting for its provider.
pub fn contract_bindings(id: &str) -> String {
    format!("provider/{CONTRACTS}/{}/bindings", segment(id))
}

/// `PUT`: the provider reports where it is with one binding.
pub fn contract_binding(id: &str, binding: &str) -> String {
    format!("{}/{}", contract_bindings(id), segment(binding))
}

/// `PUT`/`DELETE`: the buyer sets or removes its network policy for the
/// contract's provider.
pub fn contract_network_policy(id: &str) -> String {
    format!("{CONTRACTS}/{}/network-policy", segment(id))
}

/// `PUT`: the provider reports what it did with a contract's network
/// policy.
pub fn contract_network_policy_status(id: &str) -> String {
    format!("provider/{CONTRACTS}/{}/network-policy/status", segment(id))
}

/// `POST`: the consumer extends a contract before it ends.
pub fn contract_extend(id: &str) -> String {
    format!("{CONTRACTS}/{}/extend", segment(id))
}

/// `DELETE`: the buyer cancels a purchase (its contract ends now).
pub fn purchase_record(id: &str) -> String {
    format!("purchases/{}", segment(id))
}

/// `POST`: buy a reservation.
pub fn purchase(reservation: &str) -> String {
    format!("{RESERVATIONS}/{}/purchase", segment(reservation))
}

/// `GET` one service instance (its owner, its provider, an admin).
pub fn service_instance(id: &str) -> String {
    format!("{SERVICE_INSTANCES}/{}", segment(id))
}

/// A path segment: ids are opaque, so anything but unreserved bytes is
/// percent-encoded (an id can never climb out of its route).
pub fn segment(id: &str) -> String {
    id.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_percent_encoded_in_paths() {
        assert_eq!(segment("a-b_c.d~1"), "a-b_c.d~1");
        assert_eq!(segment("../x y"), "..%2Fx%20y");
        assert_eq!(contract_state("a/b"), "contracts/a%2Fb/state");
        assert_eq!(offer("live"), "offer/live");
        assert_eq!(contract_peering("c/1"), "provider/contracts/c%2F1/peering");
        assert_eq!(contract_extend("c1"), "contracts/c1/extend");
        assert_eq!(service_instance("i/1"), "service-instances/i%2F1");
        assert_eq!(
            contract_binding("c1", "b/1"),
            "provider/contracts/c1/bindings/b%2F1"
        );
    }
}
