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
        .map_err(|e| FieldError::new(field, format!("is not a valid JSON Schema: {e}")))?;
    // boon compiles a loop of references and only finds it when validating
    // (its "infinite loop" error), so without this every provision would
    // be refused as if the platform's parameters were wrong (S1-04, S1-18).
    ref_cycle(schema).map_or(Ok(()), |cycle| {
        Err(FieldError::new(
            field,
            format!(
                "is not a usable JSON Schema: its subschemas {} apply one another in a loop \
                 (by `$ref`, `allOf`, `anyOf`, `oneOf`, `not`, `if`/`then`/`else` or schema \
                 dependencies) with no `properties` or `items` in between, so no value can be \
                 checked against it",
                cycle.join(" → ")
            ),
        ))
    })
}

/// A loop of subschemas that apply one another to the same value, as the
/// JSON pointers of its members (the first repeated at the end), if
/// `schema` has one. Every JSON Schema draft evaluates `$ref` and the
/// in-place applicators against the same instance location, so such a loop
/// never reaches a verdict; a recursion through `properties`, `items` and
/// the like descends into the value and ends with it (S1-05: a `child`
/// property referring to `#` stays accepted). Only references inside the
/// document (`#` and `#/json/pointer`) are followed, and none below a
/// nested `$id`/`id` (its `#` is another resource); external ones are
/// refused by the compiler already.
fn ref_cycle(schema: &Value) -> Option<Vec<String>> {
    use std::collections::BTreeMap;
    // Every object in the document, by pointer, with the pointers of the
    // subschemas it applies in place.
    let mut edges: BTreeMap<String, Vec<String>> = BTreeMap::new();
    fn escape(key: &str) -> String {
        key.replace('~', "~0").replace('/', "~1")
    }
    fn walk(
        value: &Value,
        pointer: String,
        nested_id: bool,
        edges: &mut BTreeMap<String, Vec<String>>,
    ) {
        match value {
            Value::Object(map) => {
                let nested_id = nested_id
                    || (!pointer.is_empty()
                        && (map.get("$id").is_some_and(Value::is_string)
                            || map.get("id").is_some_and(Value::is_string)));
                let mut next = Vec::new();
                if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                    if !nested_id {
                        if let Some(fragment) = target.strip_prefix('#') {
                            if fragment.is_empty() || fragment.starts_with('/') {
                                next.push(fragment.to_string());
                            }
                        }
                    }
                }
                for key in ["allOf", "anyOf", "oneOf"] {
                    if let Some(Value::Array(items)) = map.get(key) {
                        next.extend((0..items.len()).map(|i| format!("{pointer}/{key}/{i}")));
                    }
                }
                for key in ["not", "if", "then", "else"] {
                    if map.get(key).is_some_and(Value::is_object) {
                        next.push(format!("{pointer}/{key}"));
                    }
                }
                for key in ["dependentSchemas", "dependencies"] {
                    if let Some(Value::Object(deps)) = map.get(key) {
                        next.extend(
                            deps.iter()
                                .filter(|(_, v)| v.is_object())
                                .map(|(name, _)| format!("{pointer}/{key}/{}", escape(name))),
                        );
                    }
                }
                edges.insert(pointer.clone(), next);
                for (key, child) in map {
                    walk(
                        child,
                        format!("{pointer}/{}", escape(key)),
                        nested_id,
                        edges,
                    );
                }
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    walk(child, format!("{pointer}/{i}"), nested_id, edges);
                }
            }
            _ => {}
        }
    }
    walk(schema, String::new(), false, &mut edges);
    // Depth-first search for a back edge; iterative, so a deep document
    // cannot overflow the stack.
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    let mut marks: BTreeMap<&str, Mark> = BTreeMap::new();
    for start in edges.keys() {
        if marks.contains_key(start.as_str()) {
            continue;
        }
        let mut path: Vec<(&str, usize)> = vec![(start.as_str(), 0)];
        marks.insert(start.as_str(), Mark::Open);
        while let Some((node, i)) = path.last().copied() {
            let next = edges.get(node).and_then(|n| n.get(i));
            let Some(next) = next else {
                marks.insert(node, Mark::Done);
                path.pop();
                continue;
            };
            if let Some(top) = path.last_mut() {
                top.1 += 1;
            }
            // A pointer to something that is not an object (or nothing) is
            // the compiler's to judge.
            let Some((next, _)) = edges.get_key_value(next.as_str()) else {
                continue;
            };
            match marks.get(next.as_str()) {
                Some(Mark::Open) => {
                    let from = path.iter().position(|(n, _)| *n == next.as_str())?;
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|(n, _)| format!("#{n}")).collect();
                    cycle.push(format!("#{next}"));
                    return Some(cycle);
                }
                Some(Mark::Done) => {}
                None => {
                    marks.insert(next.as_str(), Mark::Open);
                    path.push((next.as_str(), 0));
                }
            }
        }
    }
    None
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

    /// S1-04 / S1-18 (issue 41): a schema whose `$ref`s loop (`a → b → a`),
    /// for instance or binding parameters, is refused when the offer is
    /// published, naming the schema's field and the loop — it used to be
    /// accepted, and every provision then failed blaming `parameters`.
    /// Loops through `allOf` and a self-`$ref` are loops too; a recursion
    /// through `properties` (S1-05) and plain shared definitions are not.
    #[test]
    fn schemas_whose_refs_loop_are_refused_and_recursive_ones_accepted() {
        let draft = "http://json-schema.org/draft-04/schema#";
        let looping = [
            json!({"$schema": draft, "definitions": {"a": {"$ref": "#/definitions/b"},
                "b": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}),
            json!({"$schema": draft, "type": "object", "properties": {"x":
                {"$ref": "#/definitions/a"}}, "definitions": {"a": {"$ref": "#/definitions/b"},
                "b": {"$ref": "#/definitions/a"}}}),
            json!({"$schema": draft, "definitions": {"a": {"allOf": [{"$ref": "#/definitions/a"}]}},
                "$ref": "#/definitions/a"}),
            json!({"$schema": "https://json-schema.org/draft/2020-12/schema", "$ref": "#"}),
        ];
        for (which, schema) in looping.iter().enumerate() {
            for field in [
                "plans.p.schemas.service_instance.create.parameters",
                "plans.p.schemas.service_binding.create.parameters",
            ] {
                let e = check_schema(field, schema).unwrap_err();
                assert_eq!(e.field, field, "schema {which}");
                assert!(e.message.contains("loop"), "schema {which}: {}", e.message);
            }
        }
        let e = check_schema("s", &looping[0]).unwrap_err();
        assert!(
            e.message
                .contains("#/definitions/a → #/definitions/b → #/definitions/a"),
            "{}",
            e.message
        );
        // S1-05: recursion through a property ends with the value.
        let recursive = json!({"$schema": draft, "type": "object",
            "properties": {"child": {"$ref": "#"}, "name": {"type": "string"}}});
        check_schema("s", &recursive).unwrap();
        let shared = json!({"$schema": draft, "definitions": {"n": {"type": "integer"}},
            "properties": {"a": {"$ref": "#/definitions/n"}, "b": {"allOf": [{"$ref": "#/definitions/n"}]}}});
        check_schema("s", &shared).unwrap();
        let tree = json!({"$schema": draft, "definitions": {"node": {"type": "object",
            "properties": {"kids": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}},
            "$ref": "#/definitions/node"});
        check_schema("s", &tree).unwrap();
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
