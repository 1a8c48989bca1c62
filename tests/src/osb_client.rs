//! An Open Service Broker API v2.17 platform, written from the spec and
//! nothing else: it sends `X-Broker-API-Version`, authenticates, provisions,
//! binds, unbinds and deprovisions, polls `last_operation` the way a
//! platform does (honouring `Retry-After`), and checks every answer against
//! the shapes the spec requires.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{json, Value};

use crate::catalog::Resp;

/// The version this platform speaks.
pub const VERSION: &str = "2.17";

/// How the platform authenticates.
#[derive(Clone)]
pub enum Auth {
    Basic(String, String),
    Bearer(String),
    None,
}

/// A platform talking to one broker.
pub struct Platform {
    base: String,
    http: reqwest::blocking::Client,
    pub auth: Auth,
    /// `X-Broker-API-Originating-Identity`, sent with every request as a
    /// Kubernetes-based platform does (None: left out).
    pub identity: Option<String>,
}

/// The originating-identity header a Kubernetes platform sends for `user`.
pub fn kubernetes_identity(user: &str) -> String {
    use base64::Engine;
    let json = serde_json::json!({ "username": user, "uid": format!("uid-{user}"), "groups": ["system:authenticated"] });
    format!(
        "kubernetes {}",
        base64::engine::general_purpose::STANDARD.encode(json.to_string())
    )
}

/// Where a polled operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Succeeded(Option<String>),
    Failed(Option<String>),
    /// 410 Gone: for a deletion, success.
    Gone,
}

impl Platform {
    /// A platform for the broker at `base` (e.g. `http://127.0.0.1:8080`).
    pub fn new(base: &str, auth: Auth) -> Self {
        let http = crate::http::blocking_client(Duration::from_secs(30));
        Platform {
            base: base.trim_end_matches('/').to_string(),
            http,
            auth,
            identity: Some(kubernetes_identity("e2e-user")),
        }
    }

    /// Send a request with the given version header (None: leave it out).
    pub fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        version: Option<&str>,
    ) -> Resp {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(v) = version {
            req = req.header("X-Broker-API-Version", v);
        }
        req = match &self.auth {
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::None => req,
        };
        req = req.header("X-Broker-API-Request-Identity", "e2e-request");
        if let Some(identity) = &self.identity {
            req = req.header("X-Broker-API-Originating-Identity", identity);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let r = req.send().expect("OSB request");
        let status = r.status().as_u16();
        let headers = r.headers().clone();
        let text = r.text().expect("OSB body");
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        let resp = Resp {
            status,
            headers,
            text,
            json,
        };
        if status >= 400 {
            check_error_body(&resp);
        }
        resp
    }

    fn call(&self, method: Method, path: &str, body: Option<&Value>) -> Resp {
        self.send(method, path, body, Some(VERSION))
    }

    /// `GET /v2/catalog`, checked against the spec's catalog schema.
    pub fn catalog(&self) -> Value {
        let r = self.call(Method::GET, "/v2/catalog", None);
        assert_eq!(r.status, 200, "catalog: {}", r.text);
        if let Err(e) = check_catalog(&r.json) {
            panic!("the catalog breaks the spec: {e}\n{}", r.text);
        }
        r.json
    }

    fn incomplete(accepts_incomplete: bool) -> &'static str {
        if accepts_incomplete {
            "?accepts_incomplete=true"
        } else {
            ""
        }
    }

    pub fn provision(
        &self,
        instance: &str,
        service_id: &str,
        plan_id: &str,
        parameters: Option<Value>,
        accepts_incomplete: bool,
    ) -> Resp {
        let mut body = json!({
            "service_id": service_id, "plan_id": plan_id,
            "organization_guid": "org-guid", "space_guid": "space-guid",
            "context": { "platform": "kubernetes", "namespace": "e2e" },
        });
        if let Some(p) = parameters {
            body["parameters"] = p;
        }
        let r = self.call(
            Method::PUT,
            &format!(
                "/v2/service_instances/{instance}{}",
                Self::incomplete(accepts_incomplete)
            ),
            Some(&body),
        );
        check_operation_answer(&r);
        r
    }

    /// `PATCH /v2/service_instances/{instance}` with `body`.
    pub fn update(&self, instance: &str, body: &Value) -> Resp {
        self.call(
            Method::PATCH,
            &format!("/v2/service_instances/{instance}"),
            Some(body),
        )
    }

    pub fn fetch_instance(&self, instance: &str) -> Resp {
        self.call(
            Method::GET,
            &format!("/v2/service_instances/{instance}"),
            None,
        )
    }

    pub fn deprovision(
        &self,
        instance: &str,
        service_id: &str,
        plan_id: &str,
        accepts_incomplete: bool,
    ) -> Resp {
        let flag = if accepts_incomplete {
            "&accepts_incomplete=true"
        } else {
            ""
        };
        let r = self.call(
            Method::DELETE,
            &format!(
                "/v2/service_instances/{instance}?service_id={service_id}&plan_id={plan_id}{flag}"
            ),
            None,
        );
        check_operation_answer(&r);
        r
    }

    pub fn last_operation(
        &self,
        instance: &str,
        service_id: &str,
        plan_id: &str,
        operation: Option<&str>,
    ) -> Resp {
        let mut path = format!("/v2/service_instances/{instance}/last_operation?service_id={service_id}&plan_id={plan_id}");
        if let Some(op) = operation {
            path.push_str(&format!("&operation={}", encode(op)));
        }
        let r = self.call(Method::GET, &path, None);
        if r.status == 200 {
            let state = r.json["state"].as_str().unwrap_or_default();
            assert!(
                ["in progress", "succeeded", "failed"].contains(&state),
                "last_operation state must be in progress|succeeded|failed: {}",
                r.text
            );
            if let Some(d) = r.json.get("description") {
                assert!(d.is_string(), "description must be a string: {}", r.text);
            }
        }
        r
    }

    /// Poll `last_operation` until the operation ends (as a platform does).
    pub fn wait(
        &self,
        instance: &str,
        service_id: &str,
        plan_id: &str,
        operation: Option<&str>,
    ) -> Outcome {
        let deadline = Instant::now() + crate::EVENTUALLY;
        loop {
            let r = self.last_operation(instance, service_id, plan_id, operation);
            let description = r.json["description"].as_str().map(str::to_string);
            match (r.status, r.json["state"].as_str()) {
                (410, _) => return Outcome::Gone,
                (200, Some("succeeded")) => return Outcome::Succeeded(description),
                (200, Some("failed")) => return Outcome::Failed(description),
                (200, Some("in progress")) => {}
                _ => panic!("unexpected last_operation answer: {} {}", r.status, r.text),
            }
            assert!(
                Instant::now() < deadline,
                "operation still in progress after {:?}",
                crate::EVENTUALLY
            );
            let wait = r
                .header("retry-after")
                .and_then(|s| s.parse::<u64>().ok())
                .map(Duration::from_secs)
                .unwrap_or(Duration::from_millis(100))
                .min(Duration::from_millis(200));
            std::thread::sleep(wait);
        }
    }

    pub fn bind(
        &self,
        instance: &str,
        binding: &str,
        service_id: &str,
        plan_id: &str,
        app: &str,
    ) -> Resp {
        let body = json!({
            "service_id": service_id, "plan_id": plan_id,
            "bind_resource": { "app_guid": app },
            "context": { "platform": "kubernetes" },
        });
        self.call(
            Method::PUT,
            &format!("/v2/service_instances/{instance}/service_bindings/{binding}"),
            Some(&body),
        )
    }

    pub fn fetch_binding(&self, instance: &str, binding: &str) -> Resp {
        self.call(
            Method::GET,
            &format!("/v2/service_instances/{instance}/service_bindings/{binding}"),
            None,
        )
    }

    pub fn unbind(&self, instance: &str, binding: &str, service_id: &str, plan_id: &str) -> Resp {
        self.call(
            Method::DELETE,
            &format!("/v2/service_instances/{instance}/service_bindings/{binding}?service_id={service_id}&plan_id={plan_id}"),
            None,
        )
    }

    pub fn binding_last_operation(&self, instance: &str, binding: &str) -> Resp {
        self.call(
            Method::GET,
            &format!("/v2/service_instances/{instance}/service_bindings/{binding}/last_operation"),
            None,
        )
    }
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// 202 answers may carry `operation` (a string of at most 10,000 chars).
fn check_operation_answer(r: &Resp) {
    if r.status == 202 {
        if let Some(op) = r.json.get("operation") {
            let op = op
                .as_str()
                .unwrap_or_else(|| panic!("operation must be a string: {}", r.text));
            assert!(
                !op.is_empty() && op.len() <= 10_000,
                "operation: {}",
                r.text
            );
        }
    }
    if r.status < 300 {
        assert!(
            r.json.is_object(),
            "success bodies are JSON objects: {} {}",
            r.status,
            r.text
        );
    }
}

/// The service of offer `offer_id` in a `/v2/catalog` answer (its
/// `metadata.offerID`).
pub fn service_of<'a>(catalog: &'a Value, offer_id: &str) -> &'a Value {
    catalog["services"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["metadata"]["offerID"] == offer_id))
        .unwrap_or_else(|| panic!("no service for offer {offer_id} in {catalog}"))
}

/// The plan `plan_key` (its `metadata.planID`) of a catalog service.
pub fn plan_of<'a>(service: &'a Value, plan_key: &str) -> &'a Value {
    service["plans"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["metadata"]["planID"] == plan_key))
        .unwrap_or_else(|| panic!("no plan {plan_key} in {service}"))
}

/// Error bodies: a JSON object; `error`, if present, one CamelCase word;
/// `description`, if present, a non-empty string.
pub fn check_error_body(r: &Resp) {
    assert!(
        r.json.is_object(),
        "error body is not a JSON object: {} {}",
        r.status,
        r.text
    );
    if let Some(e) = r.json.get("error") {
        let e = e
            .as_str()
            .unwrap_or_else(|| panic!("error must be a string: {}", r.text));
        assert!(
            !e.is_empty() && !e.contains(char::is_whitespace),
            "error must be one word: {}",
            r.text
        );
    }
    if let Some(d) = r.json.get("description") {
        assert!(
            d.as_str().is_some_and(|d| !d.is_empty()),
            "description must be a non-empty string: {}",
            r.text
        );
    }
}

fn non_empty_str<'a>(v: &'a Value, field: &str, at: &str) -> Result<&'a str, String> {
    match v.get(field).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(format!("{at}.{field} must be a non-empty string")),
    }
}

fn optional_bool(v: &Value, field: &str, at: &str) -> Result<(), String> {
    match v.get(field) {
        None | Some(Value::Bool(_)) => Ok(()),
        Some(_) => Err(format!("{at}.{field} must be a boolean")),
    }
}

/// The catalog rules of the spec: required fields, unique service names and
/// ids, unique plan names per service, globally unique plan ids, at least
/// one plan per service, and well-formed cost metadata.
pub fn check_catalog(catalog: &Value) -> Result<(), String> {
    let services = catalog["services"]
        .as_array()
        .ok_or("services must be an array")?;
    let (mut names, mut ids, mut plan_ids) = (HashSet::new(), HashSet::new(), HashSet::new());
    for (i, s) in services.iter().enumerate() {
        let at = format!("services[{i}]");
        let name = non_empty_str(s, "name", &at)?;
        let id = non_empty_str(s, "id", &at)?;
        non_empty_str(s, "description", &at)?;
        if !s["bindable"].is_boolean() {
            return Err(format!("{at}.bindable is required and boolean"));
        }
        for f in [
            "instances_retrievable",
            "bindings_retrievable",
            "plan_updateable",
            "allow_context_updates",
        ] {
            optional_bool(s, f, &at)?;
        }
        if !names.insert(name.to_string()) || !ids.insert(id.to_string()) {
            return Err(format!("{at}: duplicate service name or id"));
        }
        if let Some(tags) = s.get("tags") {
            if !tags
                .as_array()
                .is_some_and(|t| t.iter().all(Value::is_string))
            {
                return Err(format!("{at}.tags must be an array of strings"));
            }
        }
        let plans = s["plans"]
            .as_array()
            .ok_or(format!("{at}.plans must be an array"))?;
        if plans.is_empty() {
            return Err(format!("{at}.plans must hold at least one plan"));
        }
        let mut plan_names = HashSet::new();
        for (j, p) in plans.iter().enumerate() {
            let pat = format!("{at}.plans[{j}]");
            let pname = non_empty_str(p, "name", &pat)?;
            let pid = non_empty_str(p, "id", &pat)?;
            non_empty_str(p, "description", &pat)?;
            optional_bool(p, "free", &pat)?;
            optional_bool(p, "bindable", &pat)?;
            if !plan_names.insert(pname.to_string()) || !plan_ids.insert(pid.to_string()) {
                return Err(format!("{pat}: duplicate plan name or id"));
            }
            if let Some(costs) = p.get("metadata").and_then(|m| m.get("costs")) {
                let costs = costs
                    .as_array()
                    .ok_or(format!("{pat}.metadata.costs must be an array"))?;
                for c in costs {
                    let amount = c["amount"]
                        .as_object()
                        .ok_or(format!("{pat}: cost amount must be an object"))?;
                    if amount.is_empty() || !amount.values().all(Value::is_number) {
                        return Err(format!("{pat}: cost amounts must be numbers by currency"));
                    }
                    non_empty_str(c, "unit", &pat)?;
                }
            }
        }
    }
    Ok(())
}
