//! Service offers: what sets a service plan apart from a capacity plan —
//! its hosting policy and the JSON Schemas of its parameters (OSB v2.17
//! `schemas`) — checked when an offer is published, and the check of a
//! platform's `parameters` against those schemas.
//!
//! The schemas follow the OSB v2.17 rules for `schemas`: `$schema` present
//! (naming the JSON Schema draft), no external references, at most 64 kB
//! each. They are compiled with `boon`, which brings 9 crates beyond the
//! workspace's (`jsonschema` without its default features brings 22), and
//! loads nothing: a `$ref` outside the schema is refused on publish.

use serde_json::Value;

use super::{Offer, Plan};
use crate::http::FieldError;
use catalog_client::wire::offer::OfferKind;

/// Largest schema accepted, in bytes of JSON (OSB v2.17: "MUST NOT be
/// larger than 64kB").
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// The URL a schema is compiled under: never fetched (see [`NoLoader`]).
const SCHEMA_URL: &str = "urn:liqo-broker:plan-schema";

/// Refuses every load: a plan's schema must be whole in itself.
struct NoLoader;

impl boon::UrlLoader for NoLoader {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("external reference {url} (schemas must be self-contained)").into())
    }
}

/// Compile `schema`; the error says what is wrong with it.
fn compile(schema: &Value) -> Result<(boon::Schemas, boon::SchemaIndex), String> {
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.use_loader(Box::new(NoLoader));
    compiler
        .add_resource(SCHEMA_URL, schema.clone())
        .map_err(|e| e.to_string())?;
    let index = compiler
        .compile(SCHEMA_URL, &mut schemas)
        .map_err(|e| format!("{e:#}"))?;
    Ok((schemas, index))
}

/// Check one plan schema as OSB v2.17 has it; `field` names it in the error.
pub fn check_schema(field: &str, schema: &Value) -> Result<(), FieldError> {
    if !schema.is_object() {
        return Err(FieldError::new(field, "must be a JSON Schema object"));
    }
    if schema.get("$schema").and_then(Value::as_str).is_none() {
        return Err(FieldError::new(
            field,
            "must declare its JSON Schema version in `$schema` (OSB v2.17), e.g. \"http://json-schema.org/draft-04/schema#\"",
        ));
    }
    if schema.to_string().len() > MAX_SCHEMA_BYTES {
        return Err(FieldError::new(
            field,
            format!("must be at most {MAX_SCHEMA_BYTES} bytes (OSB v2.17)"),
        ));
    }
    compile(schema)
        .map(|_| ())
        .map_err(|e| FieldError::new(field, format!("is not a valid JSON Schema: {e}")))
}

/// Check what sets service plans apart: a service plan carries a hosting
/// policy and valid schemas, a capacity plan neither.
pub fn check_plan(kind: OfferKind, field: &str, plan: &Plan) -> Result<(), FieldError> {
    match kind {
        OfferKind::Capacity => {
            if plan.hosting.is_some() {
                return Err(FieldError::new(
                    format!("{field}.hosting"),
                    "only service plans (an offer of kind `service`) have a hosting policy",
                ));
            }
            if plan.schemas.is_some() {
                return Err(FieldError::new(
                    format!("{field}.schemas"),
                    "only service plans (an offer of kind `service`) take parameters",
                ));
            }
        }
        OfferKind::Service => {
            if plan.hosting.is_none() {
                return Err(FieldError::new(
                    format!("{field}.hosting"),
                    "is required for a service plan: Local, Remote or LocalAndRemote",
                ));
            }
            for (name, schema) in plan.schemas.iter().flat_map(|s| s.each()) {
                check_schema(&format!("{field}.schemas.{name}.parameters"), schema)?;
            }
        }
    }
    Ok(())
}

/// Which parameters a request carries, to pick the plan's schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Parameters {
    InstanceCreate,
    InstanceUpdate,
    BindingCreate,
}

/// The schema `plan` declares for `which` parameters, if any.
pub fn schema_for(plan: &Plan, which: Parameters) -> Option<&Value> {
    let s = plan.schemas.as_ref()?;
    let si = s.service_instance.as_ref();
    match which {
        Parameters::InstanceCreate => si.and_then(|s| s.create.as_ref()),
        Parameters::InstanceUpdate => si.and_then(|s| s.update.as_ref()),
        Parameters::BindingCreate => s.service_binding.as_ref().and_then(|s| s.create.as_ref()),
    }?
    .parameters
    .as_ref()
}

/// Check `parameters` (`{}` when none were sent) against the schema of
/// `offer`'s plan `key` for `which`; the error names the offending field
/// as `parameters.<path>`. Capacity offers and plans without a schema take
/// any parameters, as before.
pub fn check_parameters(
    offer: &Offer,
    key: &str,
    which: Parameters,
    parameters: Option<&Value>,
) -> Result<(), String> {
    let Some(schema) = offer.plans.get(key).and_then(|p| schema_for(p, which)) else {
        return Ok(());
    };
    let (schemas, index) =
        compile(schema).map_err(|e| format!("the plan's parameter schema is unusable: {e}"))?;
    let empty = Value::Object(Default::default());
    let parameters = parameters.unwrap_or(&empty);
    schemas.validate(parameters, index).map_err(|e| {
        let leaf = deepest(&e);
        let path = leaf.instance_location.to_string().replace('/', ".");
        format!("parameters{path}: {}", leaf.kind)
    })
}

/// The first innermost cause: the one that names a field and a reason.
fn deepest<'a, 's, 'v>(e: &'a boon::ValidationError<'s, 'v>) -> &'a boon::ValidationError<'s, 'v> {
    match e.causes.first() {
        Some(cause) => deepest(cause),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "properties": {
                "size": {"type": "integer", "minimum": 1},
                "version": {"type": "string", "enum": ["8.0", "8.4"]},
            },
            "required": ["size"],
            "additionalProperties": false,
        })
    }

    fn offer() -> Offer {
        serde_json::from_value(json!({
            "id": "db", "name": "MySQL", "type": "database", "kind": "service", "description": "",
            "clusterID": "p", "clusterName": "P", "createdAt": "2026-01-01T00:00:00Z",
            "updatedAt": "2026-01-01T00:00:00Z", "version": 1,
            "plans": {"small": {"name": "small", "cost": "1", "resources": {}, "hosting": "Remote",
                "schemas": {"service_instance": {"create": {"parameters": schema()}}}}},
        }))
        .unwrap()
    }

    #[test]
    fn a_good_schema_passes_and_bad_ones_are_named() {
        check_schema("s", &schema()).unwrap();
        let mut no_version = schema();
        no_version.as_object_mut().unwrap().remove("$schema");
        assert!(check_schema("s", &no_version)
            .unwrap_err()
            .message
            .contains("$schema"));
        let mut bad_type = schema();
        bad_type["properties"]["size"]["type"] = json!("integr");
        let e = check_schema(
            "plans.a.schemas.service_instance.create.parameters",
            &bad_type,
        )
        .unwrap_err();
        assert_eq!(
            e.field,
            "plans.a.schemas.service_instance.create.parameters"
        );
        assert!(
            e.message.contains("not a valid JSON Schema"),
            "{}",
            e.message
        );
        let mut external = schema();
        external["properties"]["size"] = json!({"$ref": "http://example.com/size.json"});
        assert!(check_schema("s", &external).is_err());
        assert!(check_schema("s", &json!(["not", "an", "object"])).is_err());
    }

    #[test]
    fn parameters_are_checked_naming_the_field() {
        let o = offer();
        let create = Parameters::InstanceCreate;
        check_parameters(&o, "small", create, Some(&json!({"size": 2}))).unwrap();
        let e = check_parameters(&o, "small", create, Some(&json!({"size": "big"}))).unwrap_err();
        assert!(e.starts_with("parameters.size:"), "{e}");
        let e = check_parameters(&o, "small", create, None).unwrap_err();
        assert!(e.contains("size"), "{e}");
        let e = check_parameters(
            &o,
            "small",
            create,
            Some(&json!({"size": 1, "colour": "red"})),
        )
        .unwrap_err();
        assert!(e.contains("colour"), "{e}");
        // No binding schema: anything goes.
        check_parameters(
            &o,
            "small",
            Parameters::BindingCreate,
            Some(&json!({"x": 1})),
        )
        .unwrap();
    }

    #[test]
    fn hosting_belongs_to_service_plans_only() {
        let o = offer();
        let plan = &o.plans["small"];
        check_plan(OfferKind::Service, "plans.small", plan).unwrap();
        assert_eq!(
            check_plan(OfferKind::Capacity, "plans.small", plan)
                .unwrap_err()
                .field,
            "plans.small.hosting"
        );
        let mut no_hosting = plan.clone();
        no_hosting.hosting = None;
        assert_eq!(
            check_plan(OfferKind::Service, "plans.small", &no_hosting)
                .unwrap_err()
                .field,
            "plans.small.hosting"
        );
    }
}
