//! Rendering a service's templates with [minijinja] — pure, no cluster:
//! object templates become Kubernetes objects checked to stay inside the
//! instance namespace; the binding template becomes credentials. A
//! template that does not parse, renders to something that is not YAML
//! objects, makes an object outside the instance namespace (another
//! namespace, or a cluster-scoped kind), names an object with what is not
//! a Kubernetes name, makes RBAC its service's `allowedRBAC` does not
//! allow, or goes past a [`Bounds`] (fuel, output size, time) is refused
//! with a [`TemplateError`] naming the service, the plan and the template.
//!
//! The variables every template sees ([`Vars`]): `instance_id` (the
//! contract), `namespace` (the instance namespace, where the objects are
//! made), `remote_namespace` (its name at the customer's cluster, as Liqo
//! reports it: the one the customer's pods use), `service`, `plan`,
//! `hosting`, `parameters` (the provisioning parameters, `{}` when none),
//! `secrets` (the instance's generated secrets) and, for bindings,
//! `binding.id` and `binding.parameters`. Values are data: in object
//! templates every `{{ value }}` is written as a YAML scalar (JSON, with
//! what YAML reads differently escaped), so a customer's parameter can
//! never open a key or a document; `| tojson` writes the same and is
//! kept as it was (its output is not escaped twice). Binding credentials
//! are text, not YAML: written as they are.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use minijinja::{AutoEscape, Environment, ErrorKind};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{ObjectTemplate, Service, ServiceCatalogSpec, ServicePlan};
use crate::placement;
use crate::rbac_allow::{self, RbacRefused, RBAC_GROUP};

/// Label every rendered object (and everything else the controller makes)
/// carries.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const MANAGER: &str = "service-controller";

/// Kinds that are cluster-scoped in Kubernetes itself and in Liqo: refused
/// before anything reaches the API server (which is asked too, for kinds
/// not listed here, when the objects are applied).
const CLUSTER_SCOPED: &[&str] = &[
    "Namespace",
    "Node",
    "PersistentVolume",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "StorageClass",
    "PriorityClass",
    "RuntimeClass",
    "IngressClass",
    "CSIDriver",
    "CSINode",
    "VolumeAttachment",
    "APIService",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "CertificateSigningRequest",
    "FlowSchema",
    "PriorityLevelConfiguration",
    "ForeignCluster",
    "NamespaceMap",
];

/// What the templates of one instance are rendered with.
#[derive(Debug, Clone, Serialize)]
pub struct Vars<'a> {
    pub instance_id: &'a str,
    /// The instance namespace on this cluster: the objects' namespace.
    pub namespace: &'a str,
    /// The instance namespace as the customer's cluster names it (Liqo's
    /// `NamespaceOffloading.status.remoteNamespaceName`).
    pub remote_namespace: &'a str,
    pub service: &'a str,
    pub plan: &'a str,
    pub hosting: &'a str,
    pub parameters: &'a Value,
    pub secrets: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binding: Option<BindingVars<'a>>,
}

/// A binding's variables.
#[derive(Debug, Clone, Serialize)]
pub struct BindingVars<'a> {
    pub id: &'a str,
    pub parameters: &'a Value,
}

/// An object made by a template, as it is found again to remove it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
}

/// Why a template was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    #[error("does not render: {0}")]
    Render(String),
    #[error("does not render to YAML: {0}")]
    Yaml(String),
    #[error("document {0} is not a Kubernetes object (a mapping)")]
    NotAnObject(usize),
    #[error("document {index} has no {field}")]
    Missing { index: usize, field: &'static str },
    #[error("{kind} {name} is cluster-scoped; only objects in the instance namespace may be made")]
    ClusterScoped { kind: String, name: String },
    #[error("{kind} {name} names namespace {namespace}; only the instance namespace {instance} may be used")]
    OtherNamespace {
        kind: String,
        name: String,
        namespace: String,
        instance: String,
    },
    #[error("{kind} {name} is made twice")]
    Twice { kind: String, name: String },
    #[error("{kind} name {name:?} is not a Kubernetes name: {why}")]
    BadName {
        kind: String,
        name: String,
        why: &'static str,
    },
    #[error(transparent)]
    Rbac(RbacRefused),
    #[error(transparent)]
    Placement(placement::Refused),
    #[error("ran out of fuel: more than {0} template instructions (--template-fuel)")]
    OutOfFuel(u64),
    #[error("renders more than {0} bytes (--template-max-output)")]
    TooLarge(usize),
    #[error("did not finish rendering within {0:?} (--template-timeout)")]
    TooSlow(Duration),
}

impl Why {
    /// Whether this refusal is one of the execution bounds (fuel, output,
    /// time) rather than what the template says.
    pub fn is_bound(&self) -> bool {
        matches!(self, Why::OutOfFuel(_) | Why::TooLarge(_) | Why::TooSlow(_))
    }
}

/// The execution bounds of one render: one plan's templates for one
/// instance (or for validation), objects and credentials together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// minijinja's fuel: template instructions executed, all templates
    /// of the render together.
    pub fuel: u64,
    /// Bytes rendered, all templates of the render together.
    pub max_output: usize,
    /// Wall-clock time of the render.
    pub timeout: Duration,
}

/// Defaults: a service's templates use a few thousand instructions and
/// kilobytes; these leave room for a hundred times that and end a hostile
/// loop in well under a second.
pub const DEFAULT_FUEL: u64 = 1_000_000;
pub const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

impl Default for Bounds {
    fn default() -> Self {
        Self {
            fuel: DEFAULT_FUEL,
            max_output: DEFAULT_MAX_OUTPUT,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// What is left of the [`Bounds`] while rendering, and the template being
/// rendered (read by whoever gives up waiting at the deadline).
#[derive(Debug, Clone)]
pub struct Budget {
    bounds: Bounds,
    fuel: u64,
    output: usize,
    deadline: Instant,
    at: Arc<Mutex<Place>>,
}

/// Where a render is: service, plan, template.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Place {
    pub service: String,
    pub plan: String,
    pub template: String,
}

impl Budget {
    /// A budget of `bounds`, its time counted from now.
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            fuel: bounds.fuel,
            output: bounds.max_output,
            deadline: Instant::now() + bounds.timeout,
            at: Arc::default(),
        }
    }

    /// Fuel and output full again (the time goes on).
    fn refill(&mut self) {
        self.fuel = self.bounds.fuel;
        self.output = self.bounds.max_output;
    }

    /// The template being (or last) rendered.
    pub fn at(&self) -> Place {
        self.at.lock().map(|at| at.clone()).unwrap_or_default()
    }

    /// About to render `template` of `service`'s `plan`: still in time?
    fn enter(&self, service: &str, plan: &str, template: &str) -> Result<(), Why> {
        if let Ok(mut at) = self.at.lock() {
            *at = Place {
                service: service.to_string(),
                plan: plan.to_string(),
                template: template.to_string(),
            };
        }
        if Instant::now() >= self.deadline {
            return Err(Why::TooSlow(self.bounds.timeout));
        }
        Ok(())
    }

    /// The bounds this budget was made of.
    pub fn bounds(&self) -> Bounds {
        self.bounds
    }
}

/// How a template's `{{ value }}` is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Escape {
    /// As a YAML scalar: object templates.
    Yaml,
    /// As text: binding credentials (values, not YAML).
    Text,
}

const YAML: &str = "yaml";

/// A refused template, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service {service}, plan {plan}, template {template}: {why}")]
pub struct TemplateError {
    pub service: String,
    pub plan: String,
    pub template: String,
    pub why: Box<Why>,
}

fn environment(escape: Escape, fuel: u64) -> Environment<'static> {
    let mut env = Environment::new();
    // Lenient, the Jinja2 default: an optional parameter left out renders
    // empty (or `| default(...)`), as a chart's values do.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
    env.add_filter("tojson", tojson);
    env.set_fuel(Some(fuel));
    if escape == Escape::Yaml {
        env.set_auto_escape_callback(|_| AutoEscape::Custom(YAML));
        env.set_formatter(yaml_formatter);
    }
    env
}

/// Writes a value where an object template says `{{ value }}`: as a YAML
/// scalar (its JSON, escaped by [`escape_for_yaml`]), so what it holds —
/// `": "`, a line break, `---` — stays inside it. Safe strings (`tojson`'s
/// output, `| safe`) are written as they are; an undefined value (an
/// optional parameter left out) as nothing, as before; inside
/// `{% autoescape false %}` as text.
fn yaml_formatter(
    out: &mut minijinja::Output,
    state: &minijinja::State,
    value: &minijinja::Value,
) -> Result<(), minijinja::Error> {
    let raw = |out: &mut minijinja::Output| {
        write!(out, "{value}").map_err(|_| minijinja::Error::from(ErrorKind::WriteFailure))
    };
    if value.is_safe() || value.is_undefined() || state.auto_escape() != AutoEscape::Custom(YAML) {
        return raw(out);
    }
    // Streamed in pieces, so a value past the output bound is cut at the
    // bound instead of being copied (or, for a string, scanned) whole
    // first.
    if let Some(text) = value.as_str() {
        let fail = |_| minijinja::Error::from(ErrorKind::WriteFailure);
        out.write_str("\"").map_err(fail)?;
        for piece in pieces(text) {
            let json = serde_json::to_string(piece).map_err(|e| {
                minijinja::Error::new(ErrorKind::WriteFailure, "cannot be written as YAML")
                    .with_source(e)
            })?;
            // Without the quotes serde_json put around the piece.
            let inner = &json[1..json.len() - 1];
            out.write_str(&escape_for_yaml(inner)).map_err(fail)?;
        }
        return out.write_str("\"").map_err(fail);
    }
    serde_json::to_writer(YamlScalar(out), value).map_err(|e| {
        minijinja::Error::new(ErrorKind::WriteFailure, "cannot be written as YAML").with_source(e)
    })
}

/// JSON `text` with every character YAML does not read back as sent
/// written as its `\uXXXX` escape, the same character in JSON and in
/// YAML: NEL, LS and PS (line breaks YAML folds with the blanks around
/// them), DEL and the other C1 controls, BOM, U+FFFE and U+FFFF (which
/// make YAML refuse the whole text).
pub fn escape_for_yaml(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\u{7f}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{feff}'
            | '\u{fffe}'
            | '\u{ffff}' => escaped.push_str(&format!("\\u{:04x}", u32::from(c))),
            _ => escaped.push(c),
        }
    }
    escaped
}

/// minijinja's `tojson`, with the characters escaped that JSON leaves raw
/// but YAML, which reads what a template renders, does not read back as
/// given: the line breaks of YAML 1.1 (which libyaml, under serde_yaml_ng,
/// reads) NEL, LS and PS, folded with the blanks around them; what it
/// refuses to read (DEL, the other C1 controls, U+FFFE and U+FFFF: not
/// "c-printable", YAML 1.2 §5.1); and the BOM, a stream mark. All are BMP
/// characters, so `\uXXXX` is the same character in JSON and in YAML.
fn tojson(
    value: &minijinja::Value,
    indent: Option<minijinja::Value>,
    kwargs: minijinja::value::Kwargs,
) -> Result<minijinja::Value, minijinja::Error> {
    let json = minijinja::filters::tojson(value, indent, kwargs)?;
    let text = json.as_str().unwrap_or_default();
    let escaped = escape_for_yaml(text);
    Ok(minijinja::Value::from_safe_string(escaped))
}

/// serde_json's output, escaped for YAML, into minijinja's. serde_json
/// writes the text between its escapes (ASCII) whole, so each write is
/// UTF-8, and [`escape_for_yaml`] escapes character by character.
struct YamlScalar<'a, 'b>(&'a mut minijinja::Output<'b>);

impl io::Write for YamlScalar<'_, '_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = std::str::from_utf8(buf).map_err(io::Error::other)?;
        for piece in pieces(text) {
            self.0
                .write_str(&escape_for_yaml(piece))
                .map_err(|_| io::Error::other("output refused"))?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// `text` in pieces of at most 64 KiB, cut between characters.
fn pieces(mut text: &str) -> impl Iterator<Item = &str> {
    std::iter::from_fn(move || {
        if text.is_empty() {
            return None;
        }
        let mut end = text.len().min(64 * 1024);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, rest) = text.split_at(end);
        text = rest;
        Some(piece)
    })
}

/// Which bound a [`Sink`] hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hit {
    Size,
    Time,
}

/// Where a template renders: refuses to grow past the budget's output or
/// to go on past its deadline (checked at every write, so a loop that
/// writes stops at the deadline, not only when its fuel runs out).
struct Sink<'a> {
    out: &'a mut Vec<u8>,
    limit: usize,
    deadline: Instant,
    hit: Option<Hit>,
}

impl io::Write for Sink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.out.len().saturating_add(buf.len()) > self.limit {
            self.hit = Some(Hit::Size);
            return Err(io::Error::other("output bound"));
        }
        if Instant::now() >= self.deadline {
            self.hit = Some(Hit::Time);
            return Err(io::Error::other("time bound"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn render(
    name: &str,
    source: &str,
    vars: &Vars<'_>,
    escape: Escape,
    budget: &mut Budget,
) -> Result<String, Why> {
    if budget.fuel == 0 {
        return Err(Why::OutOfFuel(budget.bounds.fuel));
    }
    // minijinja counts fuel down in an isize: more would wrap negative.
    let env = environment(escape, budget.fuel.min(isize::MAX as u64 / 2));
    let template = env
        .template_from_named_str(name, source)
        .map_err(|e| Why::Render(describe(&e)))?;
    let mut out = Vec::new();
    let mut sink = Sink {
        out: &mut out,
        limit: budget.output,
        deadline: budget.deadline,
        hit: None,
    };
    let rendered = template.render_captured_to(vars, &mut sink);
    let hit = sink.hit;
    match rendered {
        Ok(captured) => {
            let consumed = captured.state().fuel_levels().map_or(0, |(used, _)| used);
            budget.fuel = budget.fuel.saturating_sub(consumed);
        }
        Err(e) => {
            return Err(match (hit, e.kind()) {
                (Some(Hit::Size), _) => Why::TooLarge(budget.bounds.max_output),
                (Some(Hit::Time), _) => Why::TooSlow(budget.bounds.timeout),
                (_, ErrorKind::OutOfFuel) => Why::OutOfFuel(budget.bounds.fuel),
                _ => Why::Render(describe(&e)),
            })
        }
    }
    budget.output = budget.output.saturating_sub(out.len());
    // minijinja writes what it was given as text: UTF-8.
    String::from_utf8(out).map_err(|e| Why::Render(e.to_string()))
}

/// minijinja's error with its line, without the debug dump.
fn describe(error: &minijinja::Error) -> String {
    match error.line() {
        Some(line) => format!(
            "line {line}: {}",
            error.detail().unwrap_or(&error.to_string())
        ),
        None => error.to_string(),
    }
}

/// Render every template of `service` for `plan` within `budget`: the
/// objects, each set into `vars.namespace` and labelled as the
/// controller's, in template order; then its RBAC checked against the
/// service's `allowedRBAC`.
pub fn render_objects(
    service: &Service,
    plan: &ServicePlan,
    vars: &Vars<'_>,
    budget: &mut Budget,
) -> Result<Vec<Value>, TemplateError> {
    render_templates(service, plan, &service.templates, "", vars, budget)
}

/// The objects of `service.binding_templates` for the binding of `vars`
/// (`vars.binding`), as [`render_objects`] makes an instance's; the
/// templates are named `bindingTemplates.<name>` in errors.
pub fn render_binding_objects(
    service: &Service,
    plan: &ServicePlan,
    vars: &Vars<'_>,
    budget: &mut Budget,
) -> Result<Vec<Value>, TemplateError> {
    render_templates(
        service,
        plan,
        &service.binding_templates,
        "bindingTemplates.",
        vars,
        budget,
    )
}

/// `templates` of `service` rendered for `plan` within `budget` (each
/// named in errors with `prefix` before its name): the objects, each set
/// into `vars.namespace` and labelled as the controller's, in template
/// order; then their RBAC checked against the service's `allowedRBAC`.
fn render_templates(
    service: &Service,
    plan: &ServicePlan,
    templates: &[ObjectTemplate],
    prefix: &str,
    vars: &Vars<'_>,
    budget: &mut Budget,
) -> Result<Vec<Value>, TemplateError> {
    let named = |template: &str, why| TemplateError {
        service: service.id.clone(),
        plan: plan.id.clone(),
        template: template.to_string(),
        why: Box::new(why),
    };
    let mut objects = Vec::new();
    let mut made_by = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for template in templates {
        let name = format!("{prefix}{}", template.name);
        let named = |why| named(&name, why);
        if let Some(runs_at) = &template.runs_at {
            placement::check(runs_at, &plan.id, &plan.hosting)
                .map_err(|e| named(Why::Placement(e)))?;
        }
        budget.enter(&service.id, &plan.id, &name).map_err(named)?;
        let text = render(&name, &template.template, vars, Escape::Yaml, budget).map_err(named)?;
        for (index, object) in documents(&text).map_err(named)?.into_iter().enumerate() {
            let (mut object, reference) =
                place(object, index + 1, vars.namespace).map_err(named)?;
            if let Some(runs_at) = &template.runs_at {
                placement::place(&mut object, runs_at).map_err(|e| named(Why::Placement(e)))?;
            }
            if !seen.insert((reference.kind.clone(), reference.name.clone())) {
                return Err(named(Why::Twice {
                    kind: reference.kind,
                    name: reference.name,
                }));
            }
            objects.push(object);
            made_by.push(name.clone());
        }
    }
    if let Err(refused) = rbac_allow::check(&objects, &service.allowed_rbac) {
        // Named after the template that made the refused object.
        let template = objects
            .iter()
            .position(|o| {
                let r = reference(o);
                r.kind == refused.kind() && r.name == refused.name()
            })
            .map_or("", |i| made_by[i].as_str());
        return Err(named(template, Why::Rbac(refused)));
    }
    Ok(objects)
}

/// The YAML documents of `text`, empty ones left out.
fn documents(text: &str) -> Result<Vec<Value>, Why> {
    let mut out = Vec::new();
    for document in serde_yaml_ng::Deserializer::from_str(text) {
        let value = Value::deserialize(document).map_err(|e| Why::Yaml(e.to_string()))?;
        if !value.is_null() {
            out.push(value);
        }
    }
    Ok(out)
}

/// `object` checked to belong in `namespace` and set into it.
fn place(mut object: Value, index: usize, namespace: &str) -> Result<(Value, ObjectRef), Why> {
    let Some(map) = object.as_object_mut() else {
        return Err(Why::NotAnObject(index));
    };
    let text = |map: &serde_json::Map<String, Value>, field: &'static str| {
        map.get(field)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .ok_or(Why::Missing { index, field })
    };
    let api_version = text(map, "apiVersion")?;
    let kind = text(map, "kind")?;
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(metadata) = metadata.as_object_mut() else {
        return Err(Why::Missing {
            index,
            field: "metadata",
        });
    };
    let name = metadata
        .get("name")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .ok_or(Why::Missing {
            index,
            field: "metadata.name",
        })?;
    if CLUSTER_SCOPED.contains(&kind.as_str()) {
        return Err(Why::ClusterScoped { kind, name });
    }
    let group = api_version.split_once('/').map_or("", |(g, _)| g);
    if let Err(why) = valid_name(group, &name) {
        return Err(Why::BadName { kind, name, why });
    }
    if let Some(other) = metadata.get("namespace").and_then(Value::as_str) {
        if other != namespace {
            return Err(Why::OtherNamespace {
                kind,
                name,
                namespace: other.to_string(),
                instance: namespace.to_string(),
            });
        }
    }
    metadata.insert("namespace".into(), Value::String(namespace.to_string()));
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Default::default()));
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(MANAGED_BY.into(), Value::String(MANAGER.into()));
    }
    Ok((
        object,
        ObjectRef {
            api_version,
            kind,
            name,
        },
    ))
}

/// `name` checked against Kubernetes' rules for names of `group`'s kinds
/// before it goes into a request's path (where `?`, `/` or `..` would
/// change what is asked). Roles and RoleBindings: path segment names
/// (`ValidateRBACName` is `path.IsValidPathSegmentName`,
/// pkg/apis/rbac/validation/validation.go; the rule in
/// staging/src/k8s.io/apimachinery/pkg/api/validation/path/name.go:25-31).
/// Every other kind here, custom resources included: a DNS-1123 subdomain
/// (`ValidateObjectMeta` with `NameIsDNSSubdomain`; `IsDNS1123Subdomain`
/// in staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go:
/// at most 253 characters, dot-separated labels of lower-case letters,
/// digits and `-`, each starting and ending alphanumeric). Kinds with a
/// stricter rule (a Service's DNS-1035 label) are refused by the API
/// server itself.
pub fn valid_name(group: &str, name: &str) -> Result<(), &'static str> {
    if group == RBAC_GROUP {
        if name == "." || name == ".." {
            return Err("may not be '.' or '..'");
        }
        if name.contains('/') || name.contains('%') {
            return Err("may not contain '/' or '%'");
        }
        return Ok(());
    }
    if name.len() > 253 {
        return Err("a DNS-1123 subdomain has at most 253 characters");
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if !name.split('.').all(label_ok) {
        return Err("a DNS-1123 subdomain is lower-case letters, digits, '-' and '.', starting and ending with a letter or digit");
    }
    Ok(())
}

/// The object's reference (for objects [`render_objects`] made).
pub fn reference(object: &Value) -> ObjectRef {
    let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or_default().to_string();
    ObjectRef {
        api_version: text(object.get("apiVersion")),
        kind: text(object.get("kind")),
        name: text(object.pointer("/metadata/name")),
    }
}

/// The binding's credentials: each of `service.binding_credentials`
/// rendered as text, within `budget`.
pub fn render_credentials(
    service: &Service,
    plan: &ServicePlan,
    vars: &Vars<'_>,
    budget: &mut Budget,
) -> Result<BTreeMap<String, String>, TemplateError> {
    let mut credentials = BTreeMap::new();
    for (key, source) in &service.binding_credentials {
        let name = format!("bindingCredentials.{key}");
        let named = |why| TemplateError {
            service: service.id.clone(),
            plan: plan.id.clone(),
            template: name.clone(),
            why: Box::new(why),
        };
        budget.enter(&service.id, &plan.id, &name).map_err(named)?;
        let value = render(&name, source, vars, Escape::Text, budget).map_err(named)?;
        credentials.insert(key.clone(), value);
    }
    Ok(credentials)
}

/// Check every template of every plan of `spec` before anything is
/// published: rendered with no parameters, stand-in secrets and a stand-in
/// instance, each must parse and make objects inside the namespace; the
/// binding templates must render. Each plan's render has the fuel and
/// output of `bounds`; all of them together its time.
pub fn validate(spec: &ServiceCatalogSpec, bounds: Bounds) -> Result<(), TemplateError> {
    let mut budget = Budget::new(bounds);
    validate_within(spec, &mut budget)
}

/// [`validate`] within `budget` (whose template names the one rendered
/// when its time ran out).
pub fn validate_within(
    spec: &ServiceCatalogSpec,
    budget: &mut Budget,
) -> Result<(), TemplateError> {
    let parameters = Value::Object(Default::default());
    for service in &spec.services {
        let secrets = service
            .secrets
            .iter()
            .map(|s| (s.clone(), "x".repeat(32)))
            .collect();
        let binding_parameters =
            serde_json::json!({"namespace": "validation", "secretName": "validation"});
        for plan in &service.plans {
            let vars = Vars {
                instance_id: "validation",
                namespace: "svc-validation",
                remote_namespace: "svc-validation",
                service: &service.id,
                plan: &plan.id,
                hosting: &plan.hosting,
                parameters: &parameters,
                secrets: &secrets,
                binding: Some(BindingVars {
                    id: "validation",
                    parameters: &binding_parameters,
                }),
            };
            budget.refill();
            render_objects(service, plan, &vars, budget)?;
            render_credentials(service, plan, &vars, budget)?;
            render_binding_objects(service, plan, &vars, budget)?;
        }
    }
    Ok(())
}

/// A new secret: 24 random bytes, base64url (32 characters).
pub fn draw_secret() -> Result<String, ring::error::Unspecified> {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new().fill(&mut bytes)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn service(templates: &[(&str, &str)]) -> Service {
        Service {
            id: "mysql".into(),
            name: "MySQL".into(),
            service_type: "database".into(),
            plans: vec![ServicePlan {
                id: "remote".into(),
                name: "remote".into(),
                cost: "3".into(),
                hosting: "Remote".into(),
                ..ServicePlan::default()
            }],
            secrets: vec!["password".into()],
            templates: templates
                .iter()
                .map(|(n, t)| ObjectTemplate {
                    name: n.to_string(),
                    template: t.to_string(),
                    runs_at: None,
                })
                .collect(),
            binding_credentials: [
                (
                    "uri".to_string(),
                    "mysql://root:{{ secrets.password }}@db.{{ namespace }}:3306".to_string(),
                ),
                ("host".to_string(), "db.{{ remote_namespace }}".to_string()),
            ]
            .into(),
            ..Service::default()
        }
    }

    fn budget() -> Budget {
        Budget::new(Bounds::default())
    }

    fn with<T>(f: impl FnOnce(&Vars<'_>) -> T) -> T {
        let parameters = json!({"size": 3, "name": "a\nkind: Namespace"});
        let secrets = [("password".to_string(), "s3cret".to_string())].into();
        f(&Vars {
            instance_id: "c-1",
            namespace: "svc-c-1",
            remote_namespace: "svc-c-1-far",
            service: "mysql",
            plan: "remote",
            hosting: "Remote",
            parameters: &parameters,
            secrets: &secrets,
            binding: None,
        })
    }

    const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: db\n  labels: {instance: {{ instance_id | tojson }}}\nspec:\n  replicas: {{ parameters.size }}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: db}\n";

    #[test]
    fn objects_render_into_the_instance_namespace_with_the_variables() {
        let s = service(&[("db", DEPLOYMENT)]);
        let objects = with(|v| render_objects(&s, &s.plans[0], v, &mut budget())).unwrap();
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["spec"]["replicas"], 3);
        assert_eq!(objects[0]["metadata"]["namespace"], "svc-c-1");
        assert_eq!(objects[0]["metadata"]["labels"]["instance"], "c-1");
        assert_eq!(objects[1]["metadata"]["labels"][MANAGED_BY], MANAGER);
        assert_eq!(
            reference(&objects[1]),
            ObjectRef {
                api_version: "v1".into(),
                kind: "Service".into(),
                name: "db".into()
            }
        );
        let credentials = with(|v| render_credentials(&s, &s.plans[0], v, &mut budget())).unwrap();
        assert_eq!(credentials["uri"], "mysql://root:s3cret@db.svc-c-1:3306");
        // The name the customer's pods use: Liqo's.
        assert_eq!(credentials["host"], "db.svc-c-1-far");
        // An object may name it too; it is still made here.
        let s = service(&[(
            "t",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\ndata: {host: {{ \"db.\" ~ remote_namespace }}}\n",
        )]);
        let objects = with(|v| render_objects(&s, &s.plans[0], v, &mut budget())).unwrap();
        assert_eq!(objects[0]["data"]["host"], "db.svc-c-1-far");
        assert_eq!(objects[0]["metadata"]["namespace"], "svc-c-1");
    }

    #[test]
    fn templates_that_leave_the_namespace_or_do_not_parse_are_refused_by_name() {
        let refused = |template: &str| {
            let s = service(&[("ok", DEPLOYMENT), ("bad", template)]);
            with(|v| render_objects(&s, &s.plans[0], v, &mut budget())).unwrap_err()
        };
        let e = refused("apiVersion: v1\nkind: Namespace\nmetadata: {name: x}");
        assert_eq!(
            e.to_string(),
            "service mysql, plan remote, template bad: Namespace x is cluster-scoped; only objects in the instance namespace may be made"
        );
        let e =
            refused("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: kube-system}");
        assert!(
            matches!(*e.why, Why::OtherNamespace { ref namespace, .. } if namespace == "kube-system"),
            "{e}"
        );
        assert_eq!(e.template, "bad");
        assert!(matches!(*refused("{% if %}").why, Why::Render(_)));
        assert!(matches!(*refused("a: [1, 2").why, Why::Yaml(_)));
        assert!(matches!(*refused("- 1\n- 2").why, Why::NotAnObject(1)));
        assert!(matches!(
            *refused("apiVersion: v1\nkind: ConfigMap\nmetadata: {}").why,
            Why::Missing {
                field: "metadata.name",
                ..
            }
        ));
        assert!(matches!(
            *refused("apiVersion: v1\nkind: Service\nmetadata: {name: db}").why,
            Why::Twice { .. }
        ));
    }

    #[test]
    fn validation_renders_every_plan_without_parameters() {
        let mut spec = ServiceCatalogSpec {
            services: vec![service(&[("db", DEPLOYMENT)])],
        };
        validate(&spec, Bounds::default()).unwrap();
        spec.services[0]
            .binding_credentials
            .insert("x".into(), "{{ ".into());
        let e = validate(&spec, Bounds::default()).unwrap_err();
        assert_eq!(e.template, "bindingCredentials.x");
    }

    /// Issue 45: a binding's templates make objects named after it, in
    /// the instance namespace, checked as an instance's are and named
    /// `bindingTemplates.<name>`; validation renders them too.
    #[test]
    fn binding_templates_make_objects_of_the_binding() {
        let mut s = service(&[("db", DEPLOYMENT)]);
        s.binding_templates = vec![ObjectTemplate {
            name: "endpoint".into(),
            template: "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ \"db-\" ~ binding.id }}\nspec:\n  ports: [{port: {{ binding.parameters.port }}}]\n".into(),
            runs_at: None,
        }];
        let binding_parameters = json!({"port": 5432});
        let objects = with(|v| {
            let vars = Vars {
                binding: Some(BindingVars {
                    id: "b1",
                    parameters: &binding_parameters,
                }),
                ..v.clone()
            };
            render_binding_objects(&s, &s.plans[0], &vars, &mut budget())
        })
        .unwrap();
        assert_eq!(objects.len(), 1);
        assert_eq!(objects[0]["metadata"]["name"], "db-b1");
        assert_eq!(objects[0]["metadata"]["namespace"], "svc-c-1");
        assert_eq!(objects[0]["spec"]["ports"][0]["port"], 5432);
        let mut spec = ServiceCatalogSpec { services: vec![s] };
        validate(&spec, Bounds::default()).unwrap();
        spec.services[0].binding_templates[0].template =
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: kube-system}\n".into();
        let e = validate(&spec, Bounds::default()).unwrap_err();
        assert_eq!(e.template, "bindingTemplates.endpoint");
        assert!(matches!(*e.why, Why::OtherNamespace { .. }), "{e}");
    }

    /// Issue 45: a template's `runsAt` places its pods, within its plan's
    /// hosting; one that contradicts it is refused, named.
    #[test]
    fn a_templates_runs_at_places_its_pods_within_the_plan() {
        let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: db}\nspec:\n  template:\n    spec:\n      containers: [{name: db, image: db}]\n---\napiVersion: v1\nkind: Service\nmetadata: {name: db}\n";
        let mut s = service(&[("db", deployment)]);
        s.templates[0].runs_at = Some("customer".into());
        let objects = with(|v| render_objects(&s, &s.plans[0], v, &mut budget())).unwrap();
        let pod = &objects[0]["spec"]["template"]["spec"];
        assert_eq!(
            pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                ["nodeSelectorTerms"][0]["matchExpressions"][0]["operator"],
            "In"
        );
        assert_eq!(pod["tolerations"][0]["key"], placement::VIRTUAL_NODE_TAINT);
        // The Service makes no pods: as it was.
        assert!(objects[1].get("spec").is_none());
        s.templates[0].runs_at = Some("provider".into());
        let e = with(|v| render_objects(&s, &s.plans[0], v, &mut budget())).unwrap_err();
        assert_eq!(
            e.to_string(),
            "service mysql, plan remote, template db: runs at the provider, but plan remote hosts Remote: Liqo runs every pod of the instance namespace at the customer's cluster"
        );
    }

    #[test]
    fn tojson_values_are_read_back_as_they_were_given() {
        // YAML folds or refuses what JSON leaves raw: its line breaks
        // (NEL, LS, PS, with the spaces around them) and the characters
        // it does not print (DEL, C1 controls, BOM, U+FFFE/U+FFFF).
        let given = "a \u{2028}  b\u{2029}c\u{85}d\u{7f}e\u{9f}\u{feff}f\u{fffe}\u{ffff}\t\"\n  x: y\n---\n{{ z }}<&>'\u{1f600}";
        let s = service(&[(
            "t",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\ndata:\n  v: {{ parameters.v | tojson }}\n  w: {{ parameters | tojson }}\n",
        )]);
        let parameters = json!({"v": given});
        let secrets = BTreeMap::new();
        let vars = Vars {
            instance_id: "c-1",
            namespace: "svc-c-1",
            remote_namespace: "svc-c-1-far",
            service: "mysql",
            plan: "remote",
            hosting: "Remote",
            parameters: &parameters,
            secrets: &secrets,
            binding: None,
        };
        let objects = render_objects(&s, &s.plans[0], &vars, &mut budget()).unwrap();
        assert_eq!(objects[0]["data"]["v"], given);
        assert_eq!(objects[0]["data"]["w"], parameters);
    }

    fn vars_with<T>(parameters: &Value, f: impl FnOnce(&Vars<'_>) -> T) -> T {
        let secrets = BTreeMap::new();
        f(&Vars {
            instance_id: "c-1",
            namespace: "svc-c-1",
            remote_namespace: "svc-c-1-far",
            service: "mysql",
            plan: "remote",
            hosting: "Remote",
            parameters,
            secrets: &secrets,
            binding: None,
        })
    }

    /// T-09: a template that writes a customer's parameter without
    /// `| tojson` no longer lets it open keys or documents (here a
    /// RoleBinding to cluster-admin): the value is written as a YAML
    /// scalar and read back as given.
    #[test]
    fn values_written_raw_are_data() {
        let injected = "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {name: pwn}\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}\nsubjects: [{kind: Group, name: 'system:authenticated'}]";
        let hostile = format!("{injected}\n  extra: key\u{2028}\u{85}\u{7f}{{{{ z }}}}\"'");
        let s = service(&[(
            "t",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata:\n  name: {{ parameters.name }}\n  size: {{ parameters.size }}\n  all: {{ parameters }}\n  missing: {{ parameters.nothing }}\n  joined: {{ \"db://\" ~ namespace ~ \":5432\" }}\n  json: {{ parameters.name | tojson }}\n",
        )]);
        let parameters = json!({"name": hostile, "size": 3});
        let objects = vars_with(&parameters, |v| {
            render_objects(&s, &s.plans[0], v, &mut budget())
        })
        .unwrap();
        assert_eq!(objects.len(), 1, "{objects:?}");
        let data = &objects[0]["data"];
        assert_eq!(data["name"], hostile);
        assert_eq!(
            data["json"], hostile,
            "| tojson keeps working, not escaped twice"
        );
        assert_eq!(data["size"], 3);
        assert_eq!(data["all"], parameters);
        assert_eq!(data["missing"], Value::Null);
        assert_eq!(data["joined"], "db://svc-c-1:5432");
        // Credentials are text, not YAML: written as they are.
        let mut s = s;
        s.binding_credentials = [(
            "u".to_string(),
            "{{ parameters.name }}@{{ namespace }}".to_string(),
        )]
        .into();
        let credentials = vars_with(&parameters, |v| {
            render_credentials(&s, &s.plans[0], v, &mut budget())
        })
        .unwrap();
        assert_eq!(credentials["u"], format!("{hostile}@svc-c-1"));
    }

    /// T-09: RBAC a template makes is refused unless the service's
    /// `allowedRBAC` covers it — a RoleBinding to a custom ClusterRole
    /// granting `*` as to cluster-admin — at validation, named.
    #[test]
    fn rbac_outside_the_allow_list_is_refused_by_name() {
        let binding = |role: &str| {
            format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: b}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {role}}}\nsubjects: [{{kind: ServiceAccount, name: default}}]\n")
        };
        for role in ["star", "cluster-admin"] {
            let spec = ServiceCatalogSpec {
                services: vec![service(&[("ok", DEPLOYMENT), ("rb", &binding(role))])],
            };
            let e = validate(&spec, Bounds::default()).unwrap_err();
            assert_eq!(e.template, "rb");
            assert_eq!(
                e.to_string(),
                format!("service mysql, plan remote, template rb: RoleBinding b binds ClusterRole {role}, which allowedRBAC.clusterRoles does not name")
            );
        }
        let mut spec = ServiceCatalogSpec {
            services: vec![service(&[("rb", &binding("view"))])],
        };
        spec.services[0].allowed_rbac.cluster_roles = vec!["view".into()];
        validate(&spec, Bounds::default()).unwrap();
    }

    /// C-12: a rendered name that is not a Kubernetes name never reaches
    /// a request's path: `x?dryRun=All&x=` and `/../` are refused.
    #[test]
    fn names_are_kubernetes_names() {
        for name in [
            "x?dryRun=All&x=",
            "/../",
            "..",
            "a/b",
            "A",
            "x%2f",
            &"a".repeat(254),
        ] {
            let s = service(&[(
                "t",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ parameters.n }}}\n",
            )]);
            let parameters = json!({"n": name});
            let e = vars_with(&parameters, |v| {
                render_objects(&s, &s.plans[0], v, &mut budget())
            })
            .unwrap_err();
            assert!(
                matches!(&*e.why, Why::BadName { name: n, .. } if n == name),
                "{name}: {e}"
            );
        }
        assert!(valid_name("", "a.b-1").is_ok());
        assert!(valid_name(RBAC_GROUP, "system:reader").is_ok());
        assert!(valid_name(RBAC_GROUP, "..").is_err());
        assert!(valid_name(RBAC_GROUP, "a/b").is_err());
    }

    /// C-06: the reviewer's nested loop runs out of fuel.
    #[test]
    fn a_nested_loop_runs_out_of_fuel() {
        let spec = ServiceCatalogSpec {
            services: vec![service(&[(
                "loop",
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
            )])],
        };
        let e = validate(&spec, Bounds::default()).unwrap_err();
        assert_eq!(*e.why, Why::OutOfFuel(DEFAULT_FUEL));
        assert_eq!(e.template, "loop");
        assert!(e.why.is_bound());
        // The fuel is the render's, all templates together.
        // (An empty loop's turn costs 3.)
        let part = "{% for i in range(100000) %}{% endfor %}apiVersion: v1\nkind: ConfigMap\nmetadata: {name: NAME}\n";
        let spec = ServiceCatalogSpec {
            services: vec![service(&[
                ("a", &part.replace("NAME", "a")),
                ("b", &part.replace("NAME", "b")),
                ("c", &part.replace("NAME", "c")),
                ("d", &part.replace("NAME", "d")),
            ])],
        };
        assert_eq!(
            validate(&spec, Bounds::default()).unwrap_err().template,
            "d"
        );
    }

    /// C-08: a 50 MB value is refused for its size, not accepted.
    #[test]
    fn output_past_the_bound_is_refused() {
        let spec = ServiceCatalogSpec {
            services: vec![service(&[(
                "big",
                "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {v: {{ \"x\" * 50000000 }}}\n",
            )])],
        };
        let e = validate(&spec, Bounds::default()).unwrap_err();
        assert_eq!(*e.why, Why::TooLarge(DEFAULT_MAX_OUTPUT));
        assert_eq!(
            e.to_string(),
            format!("service mysql, plan remote, template big: renders more than {DEFAULT_MAX_OUTPUT} bytes (--template-max-output)")
        );
    }

    /// C-06: a loop that writes, with fuel and output unbounded, stops at
    /// its deadline.
    #[test]
    fn a_render_past_its_time_is_refused() {
        let bounds = Bounds {
            fuel: u64::MAX,
            max_output: usize::MAX,
            timeout: Duration::from_millis(50),
        };
        let spec = ServiceCatalogSpec {
            services: vec![service(&[(
                "slow",
                "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
            )])],
        };
        let e = validate(&spec, bounds).unwrap_err();
        assert_eq!(*e.why, Why::TooSlow(Duration::from_millis(50)));
    }

    #[test]
    fn drawn_secrets_differ() {
        let (a, b) = (draw_secret().unwrap(), draw_secret().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
