//! The containers of rendered workloads, and whether what they pass a
//! binary — `--flags` in `args`, variables in `env` — is something the
//! binary accepts, judged from its own `--help` (clap lists every long
//! flag there, and every environment fallback as `[env: NAME=…]`).

use std::collections::BTreeSet;

use serde_json::Value;

/// One container of a Deployment (or another workload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// `Deployment liqo/resource-monitor`.
    pub workload: String,
    pub name: String,
    pub image: String,
    pub command: Option<Vec<String>>,
    pub args: Vec<String>,
    pub env: Vec<String>,
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .map(|v| match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every container (init containers too) of every workload in `objects`.
pub fn containers(objects: &[Value]) -> Vec<Container> {
    let mut out = Vec::new();
    for object in objects {
        let kind = object["kind"].as_str().unwrap_or_default();
        let spec = &object["spec"]["template"]["spec"];
        if spec.is_null() {
            continue;
        }
        let workload = format!(
            "{kind} {}/{}",
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default"),
            object["metadata"]["name"].as_str().unwrap_or_default()
        );
        for list in ["initContainers", "containers"] {
            for c in spec[list].as_array().into_iter().flatten() {
                out.push(Container {
                    workload: workload.clone(),
                    name: c["name"].as_str().unwrap_or_default().to_string(),
                    image: c["image"].as_str().unwrap_or_default().to_string(),
                    command: c.get("command").map(strings),
                    args: strings(&c["args"]),
                    env: c["env"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|e| e["name"].as_str().map(str::to_string))
                        .collect(),
                });
            }
        }
    }
    out
}

/// What a binary's `--help` accepts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accepted {
    pub flags: BTreeSet<String>,
    /// Variables named as clap env fallbacks, or as `$NAME` in a default.
    pub env: BTreeSet<String>,
}

/// The name part of an image reference (no tag, no digest).
pub fn image_name(reference: &str) -> &str {
    let without_digest = reference.split('@').next().unwrap_or(reference);
    // A tag follows the last ':' after the last '/' (a registry port
    // comes before a '/').
    let slash = without_digest.rfind('/').map_or(0, |i| i + 1);
    match without_digest[slash..].rfind(':') {
        Some(colon) => &without_digest[..slash + colon],
        None => without_digest,
    }
}

/// Read the long flags (`--name`) and variables (`[env: NAME=…]`,
/// `$NAME`) out of a help text.
pub fn accepted(help: &str) -> Accepted {
    let mut accepted = Accepted::default();
    let word = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect()
    };
    for line in help.lines() {
        // A flag is defined where a line starts with it (`--name`, or
        // `-n, --name`), not where the prose mentions one.
        let trimmed = line.trim_start();
        let definition = match trimmed.strip_prefix('-') {
            Some(rest) if !rest.starts_with('-') => rest
                .split_once(", ")
                .map(|(_, long)| long)
                .filter(|long| long.starts_with("--")),
            Some(_) => Some(trimmed),
            None => None,
        };
        if let Some(rest) = definition.and_then(|d| d.strip_prefix("--")) {
            let name = word(rest);
            if name.len() > 1 {
                accepted.flags.insert(format!("--{name}"));
            }
        }
        for piece in line.split('$').skip(1) {
            let name = word(piece);
            if !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_') {
                accepted.env.insert(name);
            }
        }
        for piece in line.split("env: ").skip(1) {
            let name: String = piece
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                accepted.env.insert(name);
            }
        }
    }
    accepted
}

/// What `container` passes that `accepted` does not know (empty: all of
/// it is known). `$(VAR)` references are Kubernetes' and are left alone.
pub fn unknown(container: &Container, accepted: &Accepted) -> Vec<String> {
    let mut out = Vec::new();
    for arg in &container.args {
        if let Some(long) = arg.strip_prefix("--") {
            let name = format!("--{}", long.split('=').next().unwrap_or(long));
            if !accepted.flags.contains(&name) {
                out.push(format!("flag {name}"));
            }
        } else if arg.starts_with('-') && arg.len() > 1 {
            out.push(format!("short flag {arg} (write long flags in manifests)"));
        }
    }
    for name in &container.env {
        if !accepted.env.contains(name) {
            out.push(format!("environment variable {name}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const HELP: &str = "\
Point Liqo at it with `--resource-plugin-address`.

Usage: resource-monitor [OPTIONS]

Options:
      --listen <ADDR>
          Address to serve gRPC on [env: RESOURCE_MONITOR_LISTEN=] [default: 0.0.0.0:6001]
      --lease-namespace <NS>
          Namespace of the Lease [default: $POD_NAMESPACE, else the kubeconfig's namespace]
  -h, --help
          Print help (see a summary with '-h')
";

    #[test]
    fn image_names_drop_tags_and_digests_but_keep_registry_ports() {
        assert_eq!(image_name("a/b:1"), "a/b");
        assert_eq!(image_name("host:5000/a/b"), "host:5000/a/b");
        assert_eq!(image_name("host:5000/a/b:v2@sha256:ff"), "host:5000/a/b");
        assert_eq!(image_name("b"), "b");
    }

    #[test]
    fn help_text_yields_flags_and_variables() {
        let a = accepted(HELP);
        assert_eq!(
            a.flags,
            ["--help", "--lease-namespace", "--listen"]
                .map(String::from)
                .into()
        );
        assert_eq!(
            a.env,
            ["POD_NAMESPACE", "RESOURCE_MONITOR_LISTEN"]
                .map(String::from)
                .into()
        );
    }

    #[test]
    fn unknown_flags_and_variables_are_named() {
        let objects = vec![json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "rm", "namespace": "liqo"},
            "spec": {"template": {"spec": {"containers": [{
                "name": "rm", "image": "liqo-broker/resource-monitor:dev",
                "args": ["--listen=0.0.0.0:6001", "--lease-namespace", "liqo", "--listn", "-v"],
                "env": [{"name": "POD_NAMESPACE"}, {"name": "RESOURCE_MONITOR_LISTN"}],
            }]}}}
        })];
        let found = containers(&objects);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].workload, "Deployment liqo/rm");
        assert_eq!(
            unknown(&found[0], &accepted(HELP)),
            vec![
                "flag --listn".to_string(),
                "short flag -v (write long flags in manifests)".to_string(),
                "environment variable RESOURCE_MONITOR_LISTN".to_string(),
            ]
        );
    }
}
