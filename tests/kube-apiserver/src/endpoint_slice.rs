//! `discovery.k8s.io/v1` EndpointSlices as the real API server's registry
//! keeps them: defaulted as `pkg/apis/discovery/v1/defaults.go` does and
//! validated as `pkg/apis/discovery/validation/validation.go` (DV below)
//! does — the strategy (`pkg/registry/discovery/endpointslice/strategy.go`)
//! runs `ValidateEndpointSliceCreate` on create and
//! `ValidateEndpointSliceUpdate` on update. Field paths and messages are the
//! real `field.Error`s' (the v1.31 line; `maxPorts` is 20000 since v1.30).
//! The controller that writes them for Services is
//! `endpointslice_controller`.
//!
//! Not done: the strategy's generation (1 on create, +1 when anything but
//! metadata, or the labels, change: EndpointSlices keep none here), its
//! dropping of disabled fields and warnings, and Go's sloppy IPv4 parsing
//! (`netutils.ParseIPSloppy` reads `010.1.1.1`; here it is not an address).

use std::collections::BTreeSet;
use std::net::IpAddr;

use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::status::Cause;
use crate::validation::{
    dns1123_label, dns1123_subdomain, invalid, label_value, not_supported, qualified_name, required,
};

/// The API group.
pub const DISCOVERY: &str = "discovery.k8s.io";
/// The resource.
pub const ENDPOINT_SLICES: &str = "endpointslices";

/// `discoveryv1.LabelServiceName`.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// `discoveryv1.LabelManagedBy`.
pub const LABEL_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";

/// DV:33-46 `supportedAddressTypes` and `supportedPortProtocols`, sorted
/// as `sets.String.List()` prints them; DV:47-52 the limits.
const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];
const MAX_TOPOLOGY_LABELS: usize = 16;
const MAX_ADDRESSES: usize = 100;
const MAX_PORTS: usize = 20000;
const MAX_ENDPOINTS: usize = 1000;
const MAX_ZONE_HINTS: usize = 8;

/// Whether `def` is the built-in EndpointSlice resource.
pub fn is_endpoint_slice(def: &ResourceDef) -> bool {
    !def.custom && def.group == DISCOVERY && def.plural == ENDPOINT_SLICES
}

/// `SetDefaults_EndpointPort` (`pkg/apis/discovery/v1/defaults.go`): a
/// port's `name` is `""` and its `protocol` `TCP` when left out.
pub fn default(object: &mut Value) {
    let ports = object.get_mut("ports").and_then(Value::as_array_mut);
    for port in ports.into_iter().flatten() {
        if !port.is_object() {
            continue;
        }
        if port["name"].is_null() {
            port["name"] = json!("");
        }
        if port["protocol"].is_null() {
            port["protocol"] = json!("TCP");
        }
    }
}

/// `ValidateEndpointSliceCreate` / `ValidateEndpointSliceUpdate` (DV:63-83,
/// less `ValidateObjectMeta`, which the store runs for every kind).
pub fn causes(object: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let address_type = &object["addressType"];
    // DV:224-234 `validateAddressType`.
    match address_type.as_str() {
        None | Some("") => out.push(required("addressType", "")),
        Some(t) if !ADDRESS_TYPES.contains(&t) => {
            out.push(not_supported("addressType", address_type, &ADDRESS_TYPES))
        }
        Some(_) => {}
    }
    endpoints(
        &object["endpoints"],
        address_type.as_str().unwrap_or_default(),
        out,
    );
    ports(&object["ports"], out);
    // DV:79-80: the address type is immutable.
    if let Some(old) = old {
        if old["addressType"] != object["addressType"] {
            out.push(invalid(
                "addressType",
                &object["addressType"],
                "field is immutable",
            ));
        }
    }
}

fn items(list: &Value) -> &[Value] {
    list.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// `field.TooMany`.
fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Cause {
    Cause::new(
        "FieldValueTooMany",
        field,
        format!("Too many: {actual}: must have at most {max} items"),
    )
}

/// `field.Duplicate`.
fn duplicate(field: impl Into<String>, value: &Value) -> Cause {
    Cause::new(
        "FieldValueDuplicate",
        field,
        format!("Duplicate value: {value}"),
    )
}

/// DV:85-151 `validateEndpoints`.
fn endpoints(list: &Value, address_type: &str, out: &mut Vec<Cause>) {
    let list = items(list);
    if list.len() > MAX_ENDPOINTS {
        out.push(too_many("endpoints", list.len(), MAX_ENDPOINTS));
        return;
    }
    for (i, endpoint) in list.iter().enumerate() {
        let at = format!("endpoints[{i}]");
        let address_path = format!("{at}.addresses");
        let addresses = items(&endpoint["addresses"]);
        if addresses.is_empty() {
            out.push(required(&address_path, "must contain at least 1 address"));
        } else if addresses.len() > MAX_ADDRESSES {
            out.push(too_many(&address_path, addresses.len(), MAX_ADDRESSES));
        }
        for (j, address) in addresses.iter().enumerate() {
            let path = format!("{address_path}[{j}]");
            let text = address.as_str().unwrap_or_default();
            // DV:106-118: known types only; an unknown one was refused above.
            match address_type {
                "IPv4" => {
                    if !matches!(text.parse::<IpAddr>(), Ok(IpAddr::V4(_))) {
                        out.push(invalid(&path, address, "must be a valid IPv4 address"));
                    }
                    endpoint_ip(&path, address, out);
                }
                "IPv6" => {
                    if !matches!(text.parse::<IpAddr>(), Ok(IpAddr::V6(_))) {
                        out.push(invalid(&path, address, "must be a valid IPv6 address"));
                    }
                    endpoint_ip(&path, address, out);
                }
                "FQDN" => fqdn(&path, text, out),
                _ => {}
            }
        }
        // DV:121-126: `ValidateNodeName` (a DNS subdomain).
        if let Some(node) = endpoint["nodeName"].as_str() {
            for message in dns1123_subdomain(node) {
                out.push(invalid(
                    format!("{at}.nodeName"),
                    &endpoint["nodeName"],
                    &message,
                ));
            }
        }
        // DV:128-135: at most 16 labels, each a valid label.
        let topology_path = format!("{at}.deprecatedTopology");
        if let Some(topology) = endpoint["deprecatedTopology"].as_object() {
            if topology.len() > MAX_TOPOLOGY_LABELS {
                out.push(too_many(
                    &topology_path,
                    topology.len(),
                    MAX_TOPOLOGY_LABELS,
                ));
            }
            for (key, value) in topology {
                for message in qualified_name(key) {
                    out.push(invalid(&topology_path, &json!(key), &message));
                }
                for message in label_value(value.as_str().unwrap_or_default()) {
                    out.push(invalid(&topology_path, value, &message));
                }
            }
        }
        // DV:137-139.
        if let Some(hostname) = endpoint["hostname"].as_str() {
            for message in dns1123_label(hostname) {
                out.push(invalid(
                    format!("{at}.hostname"),
                    &endpoint["hostname"],
                    &message,
                ));
            }
        }
        // DV:141-143, 236-259 `validateHints`.
        if endpoint["hints"].is_object() {
            let zones_path = format!("{at}.hints.forZones");
            let zones = items(&endpoint["hints"]["forZones"]);
            if zones.len() > MAX_ZONE_HINTS {
                out.push(too_many(&zones_path, zones.len(), MAX_ZONE_HINTS));
                continue;
            }
            let mut seen = BTreeSet::new();
            for (k, zone) in zones.iter().enumerate() {
                let path = format!("{zones_path}[{k}].name");
                let name = zone["name"].as_str().unwrap_or_default();
                if !seen.insert(name) {
                    out.push(duplicate(&path, &zone["name"]));
                }
                for message in label_value(name) {
                    out.push(invalid(&path, &zone["name"], &message));
                }
            }
        }
    }
}

/// `ValidateEndpointIP` (`pkg/apis/core/validation/validation.go`): an
/// address neither unspecified, loopback nor link-local.
fn endpoint_ip(path: &str, address: &Value, out: &mut Vec<Cause>) {
    let text = address.as_str().unwrap_or_default();
    let Ok(ip) = text.parse::<IpAddr>() else {
        out.push(invalid(path, address, "must be a valid IP address"));
        return;
    };
    if ip.is_unspecified() {
        out.push(invalid(
            path,
            address,
            &format!("may not be unspecified ({text})"),
        ));
    }
    if ip.is_loopback() {
        out.push(invalid(
            path,
            address,
            "may not be in the loopback range (127.0.0.0/8, ::1/128)",
        ));
    }
    let (link_local_unicast, link_local_multicast) = match ip {
        IpAddr::V4(v4) => (
            v4.octets()[..2] == [169, 254],
            v4.octets()[..3] == [224, 0, 0],
        ),
        IpAddr::V6(v6) => (
            v6.segments()[0] & 0xffc0 == 0xfe80,
            v6.segments()[0] & 0xff0f == 0xff02,
        ),
    };
    if link_local_unicast {
        out.push(invalid(
            path,
            address,
            "may not be in the link-local range (169.254.0.0/16, fe80::/10)",
        ));
    }
    if link_local_multicast {
        out.push(invalid(
            path,
            address,
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
        ));
    }
}

/// `IsFullyQualifiedDomainName`
/// (`staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`).
fn fqdn(path: &str, name: &str, out: &mut Vec<Cause>) {
    if name.is_empty() {
        out.push(required(path, ""));
        return;
    }
    let name = name.strip_suffix('.').unwrap_or(name);
    let errs = dns1123_subdomain(name);
    if !errs.is_empty() {
        out.push(invalid(path, &json!(name), &errs.join(",")));
        return;
    }
    if name.split('.').count() < 2 {
        out.push(invalid(
            path,
            &json!(name),
            "should be a domain with at least two segments separated by dots",
        ));
        return;
    }
    for label in name.split('.') {
        let errs = dns1123_label(label);
        if !errs.is_empty() {
            out.push(invalid(path, &json!(label), &errs.join(",")));
            return;
        }
    }
}

/// DV:153-192 `validatePorts` (on defaulted ports: a name and a protocol
/// each).
fn ports(list: &Value, out: &mut Vec<Cause>) {
    let list = items(list);
    if list.len() > MAX_PORTS {
        out.push(too_many("ports", list.len(), MAX_PORTS));
        return;
    }
    let mut names = BTreeSet::new();
    for (i, port) in list.iter().enumerate() {
        let at = format!("ports[{i}]");
        let name = port["name"].as_str().unwrap_or_default();
        if !name.is_empty() {
            for message in dns1123_label(name) {
                out.push(invalid(format!("{at}.name"), &port["name"], &message));
            }
        }
        if !names.insert(name) {
            out.push(duplicate(format!("{at}.name"), &json!(name)));
        }
        match &port["protocol"] {
            Value::Null => out.push(required(format!("{at}.protocol"), "")),
            p if !p.as_str().is_some_and(|p| PROTOCOLS.contains(&p)) => {
                out.push(not_supported(format!("{at}.protocol"), p, &PROTOCOLS))
            }
            _ => {}
        }
        if let Some(app) = port["appProtocol"].as_str() {
            for message in qualified_name(app) {
                out.push(invalid(
                    format!("{at}.appProtocol"),
                    &port["appProtocol"],
                    &message,
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(mut slice: Value, old: Option<&Value>) -> Vec<String> {
        default(&mut slice);
        let mut out = Vec::new();
        causes(&slice, old, &mut out);
        out.iter().map(Cause::text).collect()
    }

    fn slice(address_type: &str, addresses: Value) -> Value {
        json!({"addressType": address_type,
               "endpoints": [{"addresses": addresses, "conditions": {"ready": true}}],
               "ports": [{"name": "sql", "port": 5432}]})
    }

    #[test]
    fn a_slice_as_the_controller_writes_it_is_valid_and_its_ports_defaulted() {
        let mut s = slice("IPv4", json!(["10.244.0.2"]));
        s["endpoints"][0]["nodeName"] = json!("node-1");
        s["endpoints"][0]["hostname"] = json!("db-0");
        assert_eq!(checked(s.clone(), None), Vec::<String>::new());
        default(&mut s);
        assert_eq!(s["ports"][0]["protocol"], "TCP");
        let mut unnamed = json!({"addressType": "IPv4", "endpoints": [], "ports": [{"port": 1}]});
        default(&mut unnamed);
        assert_eq!(unnamed["ports"][0]["name"], "");
    }

    /// DV:224-234 and DV:79-80.
    #[test]
    fn the_address_type_is_required_supported_and_immutable() {
        let mut none = slice("IPv4", json!(["10.0.0.1"]));
        none.as_object_mut().unwrap().remove("addressType");
        assert_eq!(checked(none, None), ["addressType: Required value"]);
        assert_eq!(
            checked(slice("IP", json!(["10.0.0.1"])), None),
            [r#"addressType: Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6""#]
        );
        let old = slice("IPv4", json!(["10.0.0.1"]));
        assert_eq!(
            checked(slice("IPv6", json!(["fd00::1"])), Some(&old)),
            [r#"addressType: Invalid value: "IPv6": field is immutable"#]
        );
    }

    /// DV:96-118 with `ValidateEndpointIP`.
    #[test]
    fn addresses_must_be_of_the_type_and_not_special() {
        let mut empty = slice("IPv4", json!([]));
        assert_eq!(
            checked(empty.clone(), None),
            ["endpoints[0].addresses: Required value: must contain at least 1 address"]
        );
        empty["endpoints"][0]["addresses"] = json!(vec!["10.0.0.1"; 101]);
        assert_eq!(
            checked(empty, None),
            ["endpoints[0].addresses: Too many: 101: must have at most 100 items"]
        );
        assert_eq!(
            checked(slice("IPv4", json!(["fd00::1", "db"])), None),
            [
                r#"endpoints[0].addresses[0]: Invalid value: "fd00::1": must be a valid IPv4 address"#,
                r#"endpoints[0].addresses[1]: Invalid value: "db": must be a valid IPv4 address"#,
                r#"endpoints[0].addresses[1]: Invalid value: "db": must be a valid IP address"#,
            ]
        );
        assert_eq!(
            checked(
                slice(
                    "IPv4",
                    json!(["127.0.0.1", "0.0.0.0", "169.254.1.1", "224.0.0.5"])
                ),
                None
            ),
            [
                r#"endpoints[0].addresses[0]: Invalid value: "127.0.0.1": may not be in the loopback range (127.0.0.0/8, ::1/128)"#,
                r#"endpoints[0].addresses[1]: Invalid value: "0.0.0.0": may not be unspecified (0.0.0.0)"#,
                r#"endpoints[0].addresses[2]: Invalid value: "169.254.1.1": may not be in the link-local range (169.254.0.0/16, fe80::/10)"#,
                r#"endpoints[0].addresses[3]: Invalid value: "224.0.0.5": may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"#,
            ]
        );
        assert_eq!(
            checked(slice("IPv6", json!(["10.0.0.1", "fe80::1"])), None),
            [
                r#"endpoints[0].addresses[0]: Invalid value: "10.0.0.1": must be a valid IPv6 address"#,
                r#"endpoints[0].addresses[1]: Invalid value: "fe80::1": may not be in the link-local range (169.254.0.0/16, fe80::/10)"#,
            ]
        );
        assert_eq!(
            checked(slice("FQDN", json!(["db.example.com.", "db"])), None),
            [
                r#"endpoints[0].addresses[1]: Invalid value: "db": should be a domain with at least two segments separated by dots"#
            ]
        );
    }

    /// DV:121-143.
    #[test]
    fn node_names_hostnames_and_zone_hints_are_checked() {
        let mut s = slice("IPv4", json!(["10.0.0.1"]));
        s["endpoints"][0]["nodeName"] = json!("Node_1");
        s["endpoints"][0]["hostname"] = json!("db.0");
        s["endpoints"][0]["hints"] = json!({"forZones": [{"name": "a"}, {"name": "a"}]});
        let found = checked(s, None);
        assert_eq!(found.len(), 3, "{found:#?}");
        assert!(found[0].starts_with(
            r#"endpoints[0].nodeName: Invalid value: "Node_1": a lowercase RFC 1123 subdomain"#
        ));
        assert!(found[1].starts_with(
            r#"endpoints[0].hostname: Invalid value: "db.0": a lowercase RFC 1123 label"#
        ));
        assert_eq!(
            found[2],
            r#"endpoints[0].hints.forZones[1].name: Duplicate value: "a""#
        );
    }

    /// DV:153-192.
    #[test]
    fn ports_have_unique_label_names_and_a_supported_protocol() {
        let mut s = slice("IPv4", json!(["10.0.0.1"]));
        s["ports"] = json!([{"name": "sql", "port": 1}, {"name": "sql", "port": 2, "protocol": "ICMP"},
                            {"name": "Web", "port": 3, "appProtocol": "a/b/c"}]);
        let found = checked(s, None);
        assert_eq!(found[0], r#"ports[1].name: Duplicate value: "sql""#);
        assert_eq!(
            found[1],
            r#"ports[1].protocol: Unsupported value: "ICMP": supported values: "SCTP", "TCP", "UDP""#
        );
        assert!(
            found[2].starts_with(r#"ports[2].name: Invalid value: "Web""#),
            "{found:#?}"
        );
        assert!(
            found[3].starts_with(r#"ports[2].appProtocol: Invalid value: "a/b/c""#),
            "{found:#?}"
        );
        assert_eq!(found.len(), 4);
    }
}
