//! `networking.k8s.io/v1` NetworkPolicies as the real API server's
//! registry keeps them: defaulted as `pkg/apis/networking/v1/defaults.go`
//! does, validated as `pkg/apis/networking/validation/validation.go` does
//! (the strategy, `pkg/registry/networking/networkpolicy/strategy.go`,
//! runs `ValidateNetworkPolicy` on create and update, and keeps
//! `metadata.generation`: `builtin::strategy_keeps_generation`).
//! Each rule names the Go function it follows, read at kubernetes/kubernetes
//! `master` of late 2025 (the v1.35 line); field paths and messages are the
//! real `field.Error`s'.
//!
//! Not done: `ValidateNetworkPolicyUpdate`'s second pass over the spec (a
//! real update lists each spec cause twice, once from `ValidateNetworkPolicy`
//! and once from it; here once), and the `StrictIPCIDRValidation` checks
//! (alpha, off by default: leading zeros, bits beyond the prefix), which the
//! default server does not make either.

use std::net::Ipv6Addr;

use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::status::Cause;
use crate::validation::{forbidden, invalid, label_value, not_supported, qualified_name, required};

/// The API group.
pub const NETWORKING: &str = "networking.k8s.io";
/// The resource.
pub const NETWORK_POLICIES: &str = "networkpolicies";

/// Whether `def` is the built-in NetworkPolicy resource.
pub fn is_network_policy(def: &ResourceDef) -> bool {
    !def.custom && def.group == NETWORKING && def.plural == NETWORK_POLICIES
}

/// The defaults a real server fills in when it decodes a NetworkPolicy:
/// `SetDefaults_NetworkPolicyPort` (a port's `protocol` is `TCP`) and
/// `SetDefaults_NetworkPolicy` (no `policyTypes`: `Ingress`, and `Egress`
/// too when there are egress rules), `pkg/apis/networking/v1/defaults.go`.
/// `spec.podSelector` is a struct, not a pointer, in the Go type
/// (`k8s.io/api/networking/v1/types.go`): one left out decodes as the empty
/// selector and is written back as `{}`.
pub fn default(object: &mut Value) {
    if !object["spec"].is_object() {
        object["spec"] = json!({});
    }
    let spec = &mut object["spec"];
    if spec["podSelector"].is_null() {
        spec["podSelector"] = json!({});
    }
    // `get_mut`, not `[]`: indexing a map mutably would add the key.
    for rules in ["ingress", "egress"] {
        let rules = spec.get_mut(rules).and_then(Value::as_array_mut);
        for rule in rules.into_iter().flatten() {
            let ports = rule.get_mut("ports").and_then(Value::as_array_mut);
            for port in ports.into_iter().flatten() {
                if port.is_object() && port["protocol"].is_null() {
                    port["protocol"] = json!("TCP");
                }
            }
        }
    }
    let none = spec["policyTypes"].as_array().is_none_or(Vec::is_empty);
    if none {
        let egress = spec["egress"].as_array().is_some_and(|e| !e.is_empty());
        spec["policyTypes"] = if egress {
            json!(["Ingress", "Egress"])
        } else {
            json!(["Ingress"])
        };
    }
}

/// `ValidateNetworkPolicy` (less `ValidateObjectMeta`, which the store runs
/// for every kind: a DNS-subdomain name, `ValidateNetworkPolicyName`): the
/// spec's causes. `old` on update: `ValidationOptionsForNetworking` lets
/// label values in selectors be invalid when the stored `podSelector`
/// already was.
pub fn causes(object: &Value, old: Option<&Value>, out: &mut Vec<Cause>) {
    let allow_invalid_values = old.is_some_and(|old| {
        let mut old_causes = Vec::new();
        label_selector(&old["spec"]["podSelector"], "", false, &mut old_causes);
        !old_causes.is_empty()
    });
    spec(&object["spec"], allow_invalid_values, out);
}

/// `ValidateNetworkPolicySpec`.
fn spec(spec: &Value, allow_invalid_values: bool, out: &mut Vec<Cause>) {
    label_selector(
        &spec["podSelector"],
        "spec.podSelector",
        allow_invalid_values,
        out,
    );
    for (rules, peers) in [("ingress", "from"), ("egress", "to")] {
        for (i, rule) in items(&spec[rules]).enumerate() {
            let rule_path = format!("spec.{rules}[{i}]");
            for (j, p) in items(&rule["ports"]).enumerate() {
                port(p, &format!("{rule_path}.ports[{j}]"), out);
            }
            for (j, p) in items(&rule[peers]).enumerate() {
                peer(
                    p,
                    &format!("{rule_path}.{peers}[{j}]"),
                    allow_invalid_values,
                    out,
                );
            }
        }
    }
    let types: Vec<&Value> = items(&spec["policyTypes"]).collect();
    if types.len() > 2 {
        // `field.Invalid(…, &spec.PolicyTypes, …)`: the value printed with
        // `%#v`, as Go writes a `[]networking.PolicyType`.
        let shown: Vec<String> = types.iter().map(|t| t.to_string()).collect();
        out.push(Cause::new(
            "FieldValueInvalid",
            "spec.policyTypes",
            format!(
                "Invalid value: []networking.PolicyType{{{}}}: may not specify more than two policyTypes",
                shown.join(", ")
            ),
        ));
        return;
    }
    for (i, t) in types.into_iter().enumerate() {
        if !matches!(t.as_str(), Some("Ingress" | "Egress")) {
            out.push(not_supported(
                format!("spec.policyTypes[{i}]"),
                t,
                &["Ingress", "Egress"],
            ));
        }
    }
}

fn items(list: &Value) -> impl Iterator<Item = &Value> {
    list.as_array().into_iter().flatten()
}

/// `ValidateNetworkPolicyPort`.
fn port(port: &Value, path: &str, out: &mut Vec<Cause>) {
    let protocol = &port["protocol"];
    if !protocol.is_null() && !matches!(protocol.as_str(), Some("TCP" | "UDP" | "SCTP")) {
        out.push(not_supported(
            format!("{path}.protocol"),
            protocol,
            &["TCP", "UDP", "SCTP"],
        ));
    }
    let end = &port["endPort"];
    let end_path = format!("{path}.endPort");
    match &port["port"] {
        Value::Null => {
            if !end.is_null() {
                out.push(invalid(
                    end_path,
                    end,
                    "may not be specified when `port` is not specified",
                ));
            }
        }
        Value::String(name) => {
            if !end.is_null() {
                out.push(invalid(
                    end_path,
                    end,
                    "may not be specified when `port` is non-numeric",
                ));
            }
            for msg in port_name(name) {
                out.push(invalid(format!("{path}.port"), &port["port"], &msg));
            }
        }
        number => {
            let n = number.as_i64().unwrap_or_default();
            if let Some(msg) = port_num(n) {
                out.push(invalid(format!("{path}.port"), number, msg));
            }
            if let Some(e) = end.as_i64() {
                if e < n {
                    out.push(invalid(
                        end_path.clone(),
                        end,
                        "must be greater than or equal to `port`",
                    ));
                }
                if let Some(msg) = port_num(e) {
                    out.push(invalid(end_path.clone(), end, msg));
                }
            }
        }
    }
}

/// `IsValidPortNum` (`staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go`).
fn port_num(port: i64) -> Option<&'static str> {
    (!(1..=65535).contains(&port)).then_some("must be between 1 and 65535, inclusive")
}

/// `IsValidPortName` (same file): an IANA service name — at most 15
/// characters of `[-a-z0-9]`, at least one letter, no `--`, no hyphen at
/// either end.
pub fn port_name(port: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if port.len() > 15 {
        errs.push("must be no more than 15 characters".to_string());
    }
    let charset = !port.is_empty()
        && port
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !charset {
        errs.push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if !port.chars().any(|c| c.is_ascii_lowercase()) {
        errs.push("must contain at least one letter (a-z)".into());
    }
    if port.contains("--") {
        errs.push("must not contain consecutive hyphens".into());
    }
    if port.starts_with('-') || port.ends_with('-') {
        errs.push("must not begin or end with a hyphen".into());
    }
    errs
}

/// `ValidateNetworkPolicyPeer`: `podSelector` and/or `namespaceSelector`,
/// or `ipBlock` alone.
fn peer(peer: &Value, path: &str, allow_invalid_values: bool, out: &mut Vec<Cause>) {
    let mut count = 0;
    for selector in ["podSelector", "namespaceSelector"] {
        if !peer[selector].is_null() {
            count += 1;
            label_selector(
                &peer[selector],
                &format!("{path}.{selector}"),
                allow_invalid_values,
                out,
            );
        }
    }
    let ip_block = !peer["ipBlock"].is_null();
    if ip_block {
        count += 1;
        self::ip_block(&peer["ipBlock"], &format!("{path}.ipBlock"), out);
    }
    if count == 0 {
        out.push(required(path, "must specify a peer"));
    } else if count > 1 && ip_block {
        out.push(forbidden(
            path,
            "may not specify both ipBlock and another peer",
        ));
    }
}

/// `ValidateIPBlock`: `cidr` a CIDR, each `except` a CIDR strictly inside
/// it (contained, and a longer prefix).
fn ip_block(block: &Value, path: &str, out: &mut Vec<Cause>) {
    let cidr_text = block["cidr"].as_str().unwrap_or_default();
    if cidr_text.is_empty() {
        out.push(required(format!("{path}.cidr"), ""));
        return;
    }
    let Some(cidr) = cidr_for_legacy_field(&format!("{path}.cidr"), cidr_text, out) else {
        return;
    };
    for (i, except) in items(&block["except"]).enumerate() {
        let except_path = format!("{path}.except[{i}]");
        let text = except.as_str().unwrap_or_default();
        let Some(inner) = cidr_for_legacy_field(&except_path, text, out) else {
            continue;
        };
        if !cidr.contains(&inner) || cidr.prefix >= inner.prefix {
            out.push(invalid(
                except_path,
                except,
                "must be a strict subset of `cidr`",
            ));
        }
    }
}

/// A parsed CIDR: its family, network address (masked) and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cidr {
    v6: bool,
    network: u128,
    prefix: u32,
}

impl Cidr {
    fn bits(&self) -> u32 {
        if self.v6 {
            128
        } else {
            32
        }
    }

    fn mask(bits: u32, prefix: u32) -> u128 {
        if prefix == 0 {
            0
        } else {
            let all = if bits == 128 {
                u128::MAX
            } else {
                (1u128 << bits) - 1
            };
            all & !((1u128 << (bits - prefix)) - 1)
        }
    }

    /// `net.IPNet.Contains(other.IP)`.
    fn contains(&self, other: &Cidr) -> bool {
        self.v6 == other.v6 && other.network & Self::mask(self.bits(), self.prefix) == self.network
    }
}

/// `IsValidCIDRForLegacyField` (`staging/src/k8s.io/apimachinery/pkg/api/validation/ip.go`,
/// through `pkg/apis/core/validation`'s wrapper) as a server with the
/// `StrictIPCIDRValidation` gate off runs it: whatever
/// `netutils.ParseCIDRSloppy` (`k8s.io/utils/net`) parses — IPv4 octets
/// may have leading zeros, host bits may be set.
fn cidr_for_legacy_field(path: &str, value: &str, out: &mut Vec<Cause>) -> Option<Cidr> {
    let parsed = parse_cidr_sloppy(value);
    if parsed.is_none() {
        out.push(invalid(
            path,
            &Value::from(value),
            "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
        ));
    }
    parsed
}

fn decimal(text: &str) -> Option<u32> {
    if text.is_empty() || text.len() > 5 || !text.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// `ParseCIDRSloppy`: `address/prefix`, the network address masked.
fn parse_cidr_sloppy(value: &str) -> Option<Cidr> {
    let (address, prefix) = value.split_once('/')?;
    let prefix = decimal(prefix)?;
    let (v6, addr) = if address.contains(':') {
        (true, u128::from(address.parse::<Ipv6Addr>().ok()?))
    } else {
        let octets: Vec<&str> = address.split('.').collect();
        if octets.len() != 4 {
            return None;
        }
        let mut addr = 0u128;
        for octet in octets {
            let n = decimal(octet).filter(|n| *n <= 255)?;
            addr = (addr << 8) | u128::from(n);
        }
        (false, addr)
    };
    let bits = if v6 { 128 } else { 32 };
    if prefix > bits {
        return None;
    }
    Some(Cidr {
        v6,
        network: addr & Cidr::mask(bits, prefix),
        prefix,
    })
}

/// `ValidateLabelSelector` with `LabelSelectorValidationOptions`
/// (`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go`):
/// `matchLabels` as labels (`ValidateLabels`), each of `matchExpressions`
/// by `ValidateLabelSelectorRequirement` — a known operator with values
/// for `In`/`NotIn` and none for `Exists`/`DoesNotExist`, a qualified key,
/// and label values unless `allow_invalid_values`.
pub fn label_selector(
    selector: &Value,
    path: &str,
    allow_invalid_values: bool,
    out: &mut Vec<Cause>,
) {
    let child = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let labels_path = child("matchLabels");
    for (k, v) in selector["matchLabels"].as_object().into_iter().flatten() {
        for msg in qualified_name(k) {
            out.push(invalid(labels_path.clone(), &Value::from(k.as_str()), &msg));
        }
        for msg in label_value(v.as_str().unwrap_or_default()) {
            out.push(invalid(labels_path.clone(), v, &msg));
        }
    }
    for (i, e) in items(&selector["matchExpressions"]).enumerate() {
        let e_path = format!("{}[{i}]", child("matchExpressions"));
        let values: Vec<&Value> = items(&e["values"]).collect();
        let operator = &e["operator"];
        match operator.as_str() {
            Some("In" | "NotIn") if values.is_empty() => out.push(required(
                format!("{e_path}.values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            Some("Exists" | "DoesNotExist") if !values.is_empty() => out.push(forbidden(
                format!("{e_path}.values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            Some("In" | "NotIn" | "Exists" | "DoesNotExist") => {}
            _ => out.push(invalid(
                format!("{e_path}.operator"),
                operator,
                "not a valid selector operator",
            )),
        }
        let key = e["key"].as_str().unwrap_or_default();
        for msg in qualified_name(key) {
            out.push(invalid(format!("{e_path}.key"), &Value::from(key), &msg));
        }
        if !allow_invalid_values {
            for (j, v) in values.into_iter().enumerate() {
                for msg in label_value(v.as_str().unwrap_or_default()) {
                    out.push(invalid(format!("{e_path}.values[{j}]"), v, &msg));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(object: &Value) -> Vec<(String, String)> {
        let mut object = object.clone();
        default(&mut object);
        let mut out = Vec::new();
        causes(&object, None, &mut out);
        out.into_iter().map(|c| (c.field, c.message)).collect()
    }

    #[test]
    fn defaults_protocol_and_policy_types() {
        let mut np = json!({"spec": {"egress": [{"ports": [{"port": 53}]}]}});
        default(&mut np);
        assert_eq!(
            np["spec"],
            json!({"podSelector": {}, "policyTypes": ["Ingress", "Egress"],
                   "egress": [{"ports": [{"port": 53, "protocol": "TCP"}]}]})
        );
        let mut np = json!({"spec": {"podSelector": {}, "policyTypes": ["Egress"]}});
        default(&mut np);
        assert_eq!(np["spec"]["policyTypes"], json!(["Egress"]));
    }

    #[test]
    fn port_names_follow_is_valid_port_name() {
        assert!(port_name("http").is_empty());
        assert!(port_name("h2-c").is_empty());
        assert_eq!(port_name("80"), ["must contain at least one letter (a-z)"]);
        assert_eq!(
            port_name("-a--"),
            [
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen"
            ]
        );
        assert_eq!(port_name("abcdefghijklmnop").len(), 1);
    }

    #[test]
    fn cidrs_parse_sloppily_and_nest_strictly() {
        let c = parse_cidr_sloppy("10.0.0.0/8").unwrap();
        assert!(c.contains(&parse_cidr_sloppy("10.1.0.0/16").unwrap()));
        assert!(!c.contains(&parse_cidr_sloppy("11.0.0.0/16").unwrap()));
        assert_eq!(parse_cidr_sloppy("010.0.0.1/8"), Some(c));
        assert!(parse_cidr_sloppy("10.0.0.0/33").is_none());
        assert!(parse_cidr_sloppy("10.0.0.0").is_none());
        assert!(parse_cidr_sloppy("2001:db8::/64").is_some());
        assert!(parse_cidr_sloppy("0.0.0.0/0")
            .unwrap()
            .contains(&parse_cidr_sloppy("1.2.3.4/32").unwrap()));
        let f = fields(&json!({"spec": {"ingress": [{"from": [{"ipBlock": {
            "cidr": "10.0.0.0/8", "except": ["10.0.0.0/8", "192.168.0.0/16", "x"]}}]}]}}));
        let paths: Vec<&str> = f.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.ingress[0].from[0].ipBlock.except[0]",
                "spec.ingress[0].from[0].ipBlock.except[1]",
                "spec.ingress[0].from[0].ipBlock.except[2]"
            ]
        );
    }

    #[test]
    fn an_invalid_stored_selector_lets_values_be_invalid() {
        let np = json!({"spec": {"podSelector": {"matchExpressions": [
            {"key": "a", "operator": "In", "values": ["not valid"]}]}}});
        let mut out = Vec::new();
        causes(&np, None, &mut out);
        assert_eq!(out.len(), 1);
        let mut out = Vec::new();
        causes(&np, Some(&np), &mut out);
        assert!(out.is_empty());
    }
}
