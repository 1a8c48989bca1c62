//! Rendering a service's templates with [minijinja] — pure, no cluster:
//! object templates become Kubernetes objects checked to stay inside the
//! instance namespace; the binding template becomes credentials. A
//! template that does not parse, renders to something that is not YAML
//! objects, or makes an object outside the instance namespace (another
//! namespace, or a cluster-scoped kind) is refused with a
//! [`TemplateError`] naming the service, the plan and the template.
//!
//! The variables every template sees ([`Vars`]): `instance_id` (the
//! contract), `namespace` (the instance namespace), `service`, `plan`,
//! `hosting`, `parameters` (the provisioning parameters, `{}` when none),
//! `secrets` (the instance's generated secrets) and, for bindings,
//! `binding.id` and `binding.parameters`. Parameters are the customer's
//! words: a template should write them with `| tojson`, and whatever it
//! writes, the objects are checked after rendering.

use std::collections::BTreeMap;

use minijinja::Environment;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::{Service, ServiceCatalogSpec, ServicePlan};

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
    pub namespace: &'a str,
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
}

/// A refused template, named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("service {service}, plan {plan}, template {template}: {why}")]
pub struct TemplateError {
    pub service: String,
    pub plan: String,
    pub template: String,
    pub why: Box<Why>,
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // Lenient, the Jinja2 default: an optional parameter left out renders
    // empty (or `| default(...)`), as a chart's values do.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Lenient);
    env.add_filter("tojson", tojson);
    env
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
/// given: the line breaks of YAML 1.1 (which libyaml, under serde_yaml,
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

fn render(name: &str, source: &str, vars: &Vars<'_>) -> Result<String, Why> {
    environment()
        .render_named_str(name, source, vars)
        .map_err(|e| Why::Render(describe(&e)))
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

/// Render every template of `service` for `plan`: the objects, each set
/// into `vars.namespace` and labelled as the controller's, in template
/// order.
pub fn render_objects(
    service: &Service,
    plan: &ServicePlan,
    vars: &Vars<'_>,
) -> Result<Vec<Value>, TemplateError> {
    let mut objects = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for template in &service.templates {
        let named = |why| TemplateError {
            service: service.id.clone(),
            plan: plan.id.clone(),
            template: template.name.clone(),
            why: Box::new(why),
        };
        let text = render(&template.name, &template.template, vars).map_err(named)?;
        for (index, object) in documents(&text).map_err(named)?.into_iter().enumerate() {
            let (object, reference) = place(object, index + 1, vars.namespace).map_err(named)?;
            if !seen.insert((reference.kind.clone(), reference.name.clone())) {
                return Err(named(Why::Twice {
                    kind: reference.kind,
                    name: reference.name,
                }));
            }
            objects.push(object);
        }
    }
    Ok(objects)
}

/// The YAML documents of `text`, empty ones left out.
fn documents(text: &str) -> Result<Vec<Value>, Why> {
    let mut out = Vec::new();
    for document in serde_yaml::Deserializer::from_str(text) {
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
/// rendered.
pub fn render_credentials(
    service: &Service,
    plan: &ServicePlan,
    vars: &Vars<'_>,
) -> Result<BTreeMap<String, String>, TemplateError> {
    service
        .binding_credentials
        .iter()
        .map(|(key, source)| {
            let name = format!("bindingCredentials.{key}");
            render(&name, source, vars)
                .map(|value| (key.clone(), value))
                .map_err(|why| TemplateError {
                    service: service.id.clone(),
                    plan: plan.id.clone(),
                    template: name.clone(),
                    why: Box::new(why),
                })
        })
        .collect()
}

/// Check every template of every plan of `spec` before anything is
/// published: rendered with no parameters, stand-in secrets and a stand-in
/// instance, each must parse and make objects inside the namespace; the
/// binding templates must render.
pub fn validate(spec: &ServiceCatalogSpec) -> Result<(), TemplateError> {
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
            render_objects(service, plan, &vars)?;
            render_credentials(service, plan, &vars)?;
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
    use crate::model::ObjectTemplate;

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
                })
                .collect(),
            binding_credentials: [(
                "uri".to_string(),
                "mysql://root:{{ secrets.password }}@db.{{ namespace }}:3306".to_string(),
            )]
            .into(),
            ..Service::default()
        }
    }

    fn with<T>(f: impl FnOnce(&Vars<'_>) -> T) -> T {
        let parameters = json!({"size": 3, "name": "a\nkind: Namespace"});
        let secrets = [("password".to_string(), "s3cret".to_string())].into();
        f(&Vars {
            instance_id: "c-1",
            namespace: "svc-c-1",
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
        let objects = with(|v| render_objects(&s, &s.plans[0], v)).unwrap();
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
        let credentials = with(|v| render_credentials(&s, &s.plans[0], v)).unwrap();
        assert_eq!(credentials["uri"], "mysql://root:s3cret@db.svc-c-1:3306");
    }

    #[test]
    fn templates_that_leave_the_namespace_or_do_not_parse_are_refused_by_name() {
        let refused = |template: &str| {
            let s = service(&[("ok", DEPLOYMENT), ("bad", template)]);
            with(|v| render_objects(&s, &s.plans[0], v)).unwrap_err()
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
        validate(&spec).unwrap();
        spec.services[0]
            .binding_credentials
            .insert("x".into(), "{{ ".into());
        let e = validate(&spec).unwrap_err();
        assert_eq!(e.template, "bindingCredentials.x");
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
            service: "mysql",
            plan: "remote",
            hosting: "Remote",
            parameters: &parameters,
            secrets: &secrets,
            binding: None,
        };
        let objects = render_objects(&s, &s.plans[0], &vars).unwrap();
        assert_eq!(objects[0]["data"]["v"], given);
        assert_eq!(objects[0]["data"]["w"], parameters);
    }

    #[test]
    fn drawn_secrets_differ() {
        let (a, b) = (draw_secret().unwrap(), draw_secret().unwrap());
        assert_eq!(a.len(), 32);
        assert_ne!(a, b);
    }
}
