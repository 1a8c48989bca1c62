//! The chart's monitoring integration (issue 46), rendered by the real
//! Helm: every component serving /metrics names that port `metrics` (the
//! port its binary's `--http-listen`, the catalog's `--metrics-listen` or
//! the aggregator's `metrics_listen` binds), but the catalog with
//! `catalog.metricsPort=0`, whose /metrics is then on its API port `http`;
//! `metrics.serviceMonitor.enabled` renders one ServiceMonitor per such
//! component, over a Service exposing that port (a headless
//! `<component>-metrics` for the controllers, which have none, and the
//! catalog, whose Service is the API's), and `metrics.podMonitor.enabled`
//! one PodMonitor per component on the pod's port; off (the default)
//! neither, and both on is refused. The Grafana dashboards are ConfigMaps
//! for Grafana's sidecar, each while what it shows is enabled.

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

/// The catalog's flag serving /metrics: `--metrics-listen=` when given,
/// else `--listen=` (the API port, /metrics beside the API).
fn catalog_metrics_flag(deployment: &Value) -> &'static str {
    let separate = container(deployment)["args"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|a| text(a).starts_with("--metrics-listen="));
    if separate {
        "--metrics-listen="
    } else {
        "--listen="
    }
}

/// The port the binary serves /metrics on, from its arguments
/// (`--http-listen=`, the catalog's [`catalog_metrics_flag`]) or, for the
/// aggregator, its configuration's `metrics_listen`.
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
            catalog_metrics_flag(deployment)
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
        let port_name = if name == "catalog" && catalog_metrics_flag(deployment) == "--listen=" {
            "http"
        } else {
            "metrics"
        };
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
    ensure!(ports["catalog"].1 == 9090, "{ports:?}");
    // The catalog's /metrics on its API port, as before the metrics port.
    let mut api = EVERY_COMPONENT.to_vec();
    api.push("catalog.metricsPort=0");
    let on_api = metrics_ports(&template("liqo", &api)?)?;
    ensure!(
        on_api["catalog"] == ("http".to_string(), 8080),
        "{on_api:?}"
    );
    for (name, (port_name, _)) in &ports {
        ensure!(port_name == "metrics", "{name}: {port_name}");
        // The probes follow the rename; the catalog's stay on its API
        // port (its /healthz and /readyz are there).
        let deployment = named(&objects, "Deployment", name)?;
        let probed = if name == "catalog" { "http" } else { port_name };
        for probe in ["livenessProbe", "readinessProbe"] {
            let port = &container(deployment)[probe]["httpGet"]["port"];
            ensure!(
                port.is_null() || port == probed,
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
        // The controllers' Services (and the catalog's metrics one) are
        // the chart's own, headless.
        if name != "aggregator" && port_name == "metrics" {
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

/// The catalog's metrics port (`catalog.metricsPort`, the default 9090):
/// its own headless Service for the ServiceMonitor (the catalog's Service
/// stays the API's, 8080 only), and with the NetworkPolicy only the
/// monitoring namespaces reach it, while the API port stays open as
/// configured; with `catalog.metricsPort=0` the API port serves the
/// monitoring namespaces too, as before.
#[test]
fn the_catalogs_metrics_port_is_the_monitoring_namespaces_only() -> Result<()> {
    let sets = [
        "metrics.serviceMonitor.enabled=true",
        "networkPolicy.enabled=true",
        "networkPolicy.catalog.from[0].ipBlock.cidr=198.51.100.0/24",
    ];
    let objects = template("liqo", &sets)?;
    let api = named(&objects, "Service", "catalog")?;
    ensure!(
        api["spec"]["ports"] == json!([{"name": "http", "port": 8080, "targetPort": "http"}]),
        "{api}"
    );
    let metrics = named(&objects, "Service", "catalog-metrics")?;
    ensure!(
        metrics["spec"]["ports"]
            == json!([{"name": "metrics", "port": 9090, "targetPort": "metrics"}]),
        "{metrics}"
    );
    let ingress = |objects: &[Value]| -> Result<Vec<(Value, Value)>> {
        let policy = named(objects, "NetworkPolicy", "catalog")?;
        Ok(policy["spec"]["ingress"]
            .as_array()
            .context("ingress")?
            .iter()
            .map(|rule| (rule["from"].clone(), rule["ports"].clone()))
            .collect())
    };
    let monitoring = json!([{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]);
    let rules = ingress(&objects)?;
    let to = |port: i64| json!([{"port": port, "protocol": "TCP"}]);
    ensure!(rules.len() == 2, "{rules:?}");
    ensure!(
        rules[0].1 == to(8080) && rules[0].0 != monitoring,
        "{rules:?}"
    );
    ensure!(rules[1] == (monitoring.clone(), to(9090)), "{rules:?}");

    let mut on_api = sets.to_vec();
    on_api.push("catalog.metricsPort=0");
    let objects = template("liqo", &on_api)?;
    ensure!(named(&objects, "Service", "catalog-metrics").is_err());
    let rules = ingress(&objects)?;
    ensure!(
        rules.len() == 2 && rules[1] == (monitoring, to(8080)),
        "{rules:?}"
    );
    let deployment = named(&objects, "Deployment", "catalog")?;
    ensure!(
        !deployment.to_string().contains("--metrics-listen"),
        "{deployment}"
    );
    Ok(())
}

/// The dashboards (`dashboards.enabled`): a ConfigMap per dashboard of
/// what is enabled, labelled for Grafana's sidecar (the label and its
/// value configurable), holding the chart's dashboards/<name>.json; none
/// by default.
#[test]
fn the_dashboards_are_configmaps_for_grafanas_sidecar() -> Result<()> {
    let dashboards = |objects: &[Value]| -> Vec<String> {
        of_kind(objects, "ConfigMap")
            .into_iter()
            .map(|c| text(&c["metadata"]["name"]).to_string())
            .filter(|n| n.starts_with("liqo-broker-dashboard-"))
            .collect()
    };
    ensure!(dashboards(&template("liqo", EVERY_COMPONENT)?).is_empty());
    let mut sets = EVERY_COMPONENT.to_vec();
    sets.push("dashboards.enabled=true");
    let objects = template("liqo", &sets)?;
    ensure!(
        dashboards(&objects)
            == [
                "liqo-broker-dashboard-catalog",
                "liqo-broker-dashboard-controllers",
                "liqo-broker-dashboard-autoscaler"
            ],
        "{:?}",
        dashboards(&objects)
    );
    for name in ["catalog", "controllers", "autoscaler"] {
        let map = named(
            &objects,
            "ConfigMap",
            &format!("liqo-broker-dashboard-{name}"),
        )?;
        ensure!(
            map["metadata"]["labels"]["grafana_dashboard"] == "1",
            "{map}"
        );
        let file = std::fs::read_to_string(
            repository().join(format!("charts/liqo-broker/dashboards/{name}.json")),
        )?;
        let held: Value =
            serde_json::from_str(text(&map["data"][format!("liqo-broker-{name}.json")]))
                .with_context(|| format!("{name}: the ConfigMap's JSON"))?;
        ensure!(
            held == serde_json::from_str::<Value>(&file)?,
            "{name}: not the file's dashboard"
        );
    }
    // Only what is enabled, under the sidecar's label of choice.
    let objects = template(
        "liqo",
        &[
            "catalog.enabled=false",
            "purchaseController.enabled=true",
            "purchaseController.clusterID=consumer-1",
            "dashboards.enabled=true",
            "dashboards.label=example.com/dashboard",
            "dashboards.labelValue=yes",
            "dashboards.namespace=monitoring",
        ],
    )?;
    ensure!(
        dashboards(&objects) == ["liqo-broker-dashboard-controllers"],
        "{:?}",
        dashboards(&objects)
    );
    let map = named(&objects, "ConfigMap", "liqo-broker-dashboard-controllers")?;
    ensure!(
        map["metadata"]["labels"]["example.com/dashboard"] == "yes"
            && map["metadata"]["namespace"] == "monitoring",
        "{map}"
    );
    Ok(())
}
