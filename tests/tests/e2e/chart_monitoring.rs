//! The chart's monitoring integration (issue 46), rendered by the real
//! Helm: every component serving /metrics names that port `metrics` (the
//! port its binary's `--http-listen` or the aggregator's `metrics_listen`
//! binds), but the catalog, whose /metrics is on its API port `http`;
//! `metrics.serviceMonitor.enabled` renders one ServiceMonitor per such
//! component, over a Service exposing that port (a headless
//! `<component>-metrics` for the controllers, which have none), and
//! `metrics.podMonitor.enabled` one PodMonitor per component on the pod's
//! port; off (the default) neither, and both on is refused.

use std::collections::BTreeMap;

use anyhow::{anyhow, ensure, Context, Result};
use serde_json::{json, Value};

use crate::chart_support::*;

/// The container of a Deployment (each has one).
fn container(deployment: &Value) -> &Value {
    &deployment["spec"]["template"]["spec"]["containers"][0]
}

/// Its port named `name`.
fn port_named(deployment: &Value, name: &str) -> Option<i64> {
    container(deployment)["ports"]
        .as_array()?
        .iter()
        .find(|p| p["name"] == name)?["containerPort"]
        .as_i64()
}

/// The port the binary serves /metrics on, from its arguments
/// (`--http-listen=`, the catalog's `--listen=`) or, for the aggregator,
/// its configuration's `metrics_listen`.
fn metrics_listen(objects: &[Value], deployment: &Value) -> Result<Option<i64>> {
    let name = text(&deployment["metadata"]["name"]);
    let address = if name == "aggregator" {
        let config = named(objects, "ConfigMap", "aggregator-config")?;
        let toml = text(&config["data"]["aggregator.toml"]);
        toml.lines()
            .find_map(|l| l.trim().strip_prefix("metrics_listen = "))
            .map(|a| a.trim_matches('"').to_string())
    } else {
        let flag = if name == "catalog" {
            "--listen="
        } else {
            "--http-listen="
        };
        container(deployment)["args"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|a| text(a).strip_prefix(flag).map(str::to_string))
    };
    address
        .map(|a| {
            a.rsplit(':')
                .next()
                .and_then(|p| p.parse().ok())
                .with_context(|| format!("{name}: no port in {a}"))
        })
        .transpose()
}

/// Which port of each Deployment serves /metrics, by name, checked against
/// what its binary binds: every Deployment but resource-monitor's (Liqo
/// v0.x's gRPC plugin serves no metrics).
fn metrics_ports(objects: &[Value]) -> Result<BTreeMap<String, (String, i64)>> {
    let mut found = BTreeMap::new();
    for deployment in of_kind(objects, "Deployment") {
        let name = text(&deployment["metadata"]["name"]).to_string();
        let Some(listen) = metrics_listen(objects, deployment)? else {
            ensure!(name == "resource-monitor", "{name}: no metrics listener");
            ensure!(port_named(deployment, "metrics").is_none(), "{name}");
            continue;
        };
        let port_name = if name == "catalog" { "http" } else { "metrics" };
        let port = port_named(deployment, port_name)
            .with_context(|| format!("{name}: no container port named {port_name}"))?;
        ensure!(
            port == listen,
            "{name}: port {port_name} is {port}, the binary serves /metrics on {listen}"
        );
        // Nothing else still calls it `http`.
        if name != "catalog" {
            ensure!(
                port_named(deployment, "http").is_none(),
                "{name}: a port named http"
            );
        }
        found.insert(name, (port_name.to_string(), port));
    }
    Ok(found)
}

/// Whether `labels` hold every pair of `selector`'s matchLabels.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector["matchLabels"]
        .as_object()
        .is_some_and(|m| m.iter().all(|(k, v)| &labels[k] == v))
}

#[test]
fn every_component_serving_metrics_names_the_port_metrics() -> Result<()> {
    let objects = template("liqo", EVERY_COMPONENT)?;
    let ports = metrics_ports(&objects)?;
    ensure!(ports.len() == 8, "{ports:?}");
    for (name, (port_name, _)) in &ports {
        ensure!(
            (port_name == "metrics") != (name == "catalog"),
            "{name}: {port_name}"
        );
        // The probes follow the rename.
        let deployment = named(&objects, "Deployment", name)?;
        for probe in ["livenessProbe", "readinessProbe"] {
            let port = &container(deployment)[probe]["httpGet"]["port"];
            ensure!(
                port.is_null() || port == port_name.as_str(),
                "{name}: {probe} on {port}"
            );
        }
    }
    Ok(())
}

#[test]
fn off_by_default_and_one_kind_at_a_time() -> Result<()> {
    for sets in [Vec::new(), EVERY_COMPONENT.to_vec()] {
        let objects = template("liqo", &sets)?;
        for kind in ["ServiceMonitor", "PodMonitor"] {
            ensure!(of_kind(&objects, kind).is_empty(), "{sets:?}: a {kind}");
        }
        ensure!(
            !objects
                .iter()
                .any(|o| text(&o["metadata"]["name"]).ends_with("-metrics")),
            "{sets:?}: a metrics Service"
        );
    }
    let mut both = EVERY_COMPONENT.to_vec();
    both.extend([
        "metrics.serviceMonitor.enabled=true",
        "metrics.podMonitor.enabled=true",
    ]);
    let said = template_refused(&both)?;
    ensure!(said.contains("turn on one"), "{said}");
    Ok(())
}

#[test]
fn the_service_monitors_scrape_the_metrics_port_of_each_enabled_component() -> Result<()> {
    let mut sets = EVERY_COMPONENT.to_vec();
    sets.extend([
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.interval=30s",
        "metrics.serviceMonitor.labels.release=kube-prometheus-stack",
    ]);
    let objects = template("liqo", &sets)?;
    let ports = metrics_ports(&objects)?;
    let monitors = of_kind(&objects, "ServiceMonitor");
    ensure!(
        monitors.len() == ports.len(),
        "{} monitors for {ports:?}",
        monitors.len()
    );
    let services = of_kind(&objects, "Service");
    for monitor in monitors {
        let name = text(&monitor["metadata"]["name"]);
        let (port_name, port) = ports
            .get(name)
            .with_context(|| format!("a ServiceMonitor {name} for no component serving metrics"))?;
        ensure!(
            monitor["apiVersion"] == "monitoring.coreos.com/v1",
            "{}",
            id(monitor)
        );
        ensure!(
            monitor["metadata"]["namespace"] == "liqo"
                && monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
                && monitor["spec"]["namespaceSelector"] == json!({"matchNames": ["liqo"]}),
            "{monitor}"
        );
        let endpoints = monitor["spec"]["endpoints"]
            .as_array()
            .context("endpoints")?;
        ensure!(
            endpoints.len() == 1
                && endpoints[0]["port"] == port_name.as_str()
                && endpoints[0]["path"] == "/metrics"
                && endpoints[0]["interval"] == "30s",
            "{name}: {endpoints:?}"
        );
        // It selects one Service, whose port of that name leads to the
        // container's port serving /metrics.
        let selected: Vec<&&Value> = services
            .iter()
            .filter(|s| selects(&monitor["spec"]["selector"], &s["metadata"]["labels"]))
            .collect();
        ensure!(selected.len() == 1, "{name}: selects {selected:?}");
        let service = selected[0];
        let deployment = named(&objects, "Deployment", name)?;
        ensure!(
            selects(
                &json!({"matchLabels": service["spec"]["selector"]}),
                &deployment["spec"]["template"]["metadata"]["labels"]
            ),
            "{}: does not select {name}'s pods",
            id(service)
        );
        let service_port = service["spec"]["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == port_name.as_str())
            .with_context(|| format!("{}: no port {port_name}", id(service)))?;
        let target = &service_port["targetPort"];
        ensure!(
            target == port_name.as_str() || target.as_i64() == Some(*port),
            "{}: port {port_name} targets {target}",
            id(service)
        );
        // The controllers' Services are the chart's own, headless.
        if !["catalog", "aggregator"].contains(&name) {
            ensure!(
                service["metadata"]["name"] == format!("{name}-metrics")
                    && service["spec"]["clusterIP"] == "None",
                "{service}"
            );
        }
    }
    Ok(())
}

#[test]
fn the_pod_monitors_scrape_each_enabled_components_pods_on_the_metrics_port() -> Result<()> {
    let mut sets = EVERY_COMPONENT.to_vec();
    sets.extend([
        "metrics.podMonitor.enabled=true",
        "metrics.podMonitor.scrapeTimeout=5s",
    ]);
    let objects = template("liqo", &sets)?;
    let ports = metrics_ports(&objects)?;
    let monitors = of_kind(&objects, "PodMonitor");
    ensure!(
        monitors.len() == ports.len(),
        "{} monitors for {ports:?}",
        monitors.len()
    );
    ensure!(
        !objects
            .iter()
            .any(|o| text(&o["metadata"]["name"]).ends_with("-metrics")),
        "a PodMonitor needs no Service"
    );
    for monitor in monitors {
        let name = text(&monitor["metadata"]["name"]);
        let (port_name, _) = ports
            .get(name)
            .ok_or_else(|| anyhow!("a PodMonitor {name} for no component serving metrics"))?;
        let deployment = named(&objects, "Deployment", name)?;
        ensure!(
            selects(
                &monitor["spec"]["selector"],
                &deployment["spec"]["template"]["metadata"]["labels"]
            ),
            "{name}: the PodMonitor does not select its pods: {monitor}"
        );
        let endpoints = monitor["spec"]["podMetricsEndpoints"]
            .as_array()
            .context("podMetricsEndpoints")?;
        ensure!(
            endpoints.len() == 1
                && endpoints[0]["port"] == port_name.as_str()
                && endpoints[0]["path"] == "/metrics"
                && endpoints[0]["scrapeTimeout"] == "5s",
            "{name}: {endpoints:?}"
        );
    }
    // Only what is enabled: the purchase controller alone, one monitor.
    let objects = template(
        "liqo",
        &[
            "catalog.enabled=false",
            "purchaseController.enabled=true",
            "purchaseController.clusterID=consumer-1",
            "metrics.podMonitor.enabled=true",
        ],
    )?;
    let monitors = of_kind(&objects, "PodMonitor");
    ensure!(
        monitors.len() == 1 && monitors[0]["metadata"]["name"] == "purchase-controller",
        "{monitors:?}"
    );
    Ok(())
}

#[test]
fn the_chart_lints_clean_with_the_monitors_and_the_network_policies_on() -> Result<()> {
    for monitor in [
        "metrics.serviceMonitor.enabled=true",
        "metrics.podMonitor.enabled=true",
    ] {
        let mut sets = EVERY_COMPONENT.to_vec();
        sets.extend([
            monitor,
            "networkPolicy.enabled=true",
            "networkPolicy.apiServer.cidrs={192.0.2.10/32}",
            "networkPolicy.catalog.to[0].ipBlock.cidr=203.0.113.7/32",
            "common.podDisruptionBudget.enabled=true",
        ]);
        let (passed, said) = lint(&sets)?;
        ensure!(
            passed && said.contains("0 chart(s) failed") && !said.contains("[WARNING]"),
            "helm lint --strict {sets:?}:\n{said}"
        );
    }
    Ok(())
}
