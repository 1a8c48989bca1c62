//! Replacing one plan's resources in an offer read from the catalog, and
//! nothing else: the offer's other fields and plans, and the plan's own name
//! and cost, go back exactly as they were read, with the version read so the
//! catalog refuses the write if someone changed the offer in between.

use quantity::{Quantity, ResourceList};
use serde_json::{json, Map, Value};

use crate::config::Target;

/// What to do with the catalog's copy of the offer.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// The plan already has these resources: nothing to write.
    Unchanged,
    /// `POST /offer/{id}` this body.
    Write(Value),
}

/// Why the offer cannot be edited.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    #[error("offer {offer} does not exist in the catalog: create it first, or pass --plan-cost (and --offer-name, --offer-type) so the agent creates it")]
    MissingOffer { offer: String },
    #[error("offer {offer} has no plan {plan}: add it first, or pass --plan-cost (and --plan-name) so the agent adds it")]
    MissingPlan { offer: String, plan: String },
    #[error("the catalog's offer {offer} is not in the expected shape: {problem}")]
    Malformed { offer: String, problem: String },
}

impl OfferError {
    /// Missing offers and plans need the operator; a malformed answer may be
    /// a catalog hiccup.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, OfferError::Malformed { .. })
    }
}

/// How `offer` (the catalog's JSON, `None` if it does not exist) must change
/// so that plan `target.plan_id` offers `resources`.
pub fn edit(
    offer: Option<&Value>,
    target: &Target,
    resources: &ResourceList,
) -> Result<Edit, OfferError> {
    let Some(offer) = offer else {
        return match &target.create {
            Some(create) => Ok(Edit::Write(json!({
                "name": create.offer_name,
                "type": create.offer_type,
                "description": create.offer_description,
                "plans": { target.plan_id.clone(): new_plan(target, resources) },
                // Version 0: only if it still does not exist.
                "version": 0,
            }))),
            None => Err(OfferError::MissingOffer {
                offer: target.offer_id.clone(),
            }),
        };
    };
    let malformed = |problem: &str| OfferError::Malformed {
        offer: target.offer_id.clone(),
        problem: problem.to_string(),
    };
    let version = offer
        .get("version")
        .and_then(Value::as_u64)
        .ok_or_else(|| malformed("no version"))?;
    let mut plans = offer
        .get("plans")
        .and_then(Value::as_object)
        .cloned()
        .ok_or_else(|| malformed("no plans"))?;
    match plans.get_mut(&target.plan_id) {
        Some(plan) => {
            let plan = plan
                .as_object_mut()
                .ok_or_else(|| malformed("a plan is not an object"))?;
            if plan.get("resources").and_then(parse_resources).as_ref() == Some(resources) {
                return Ok(Edit::Unchanged);
            }
            plan.insert("resources".into(), resources_json(resources));
        }
        None => match &target.create {
            Some(_) => {
                plans.insert(target.plan_id.clone(), new_plan(target, resources));
            }
            None => {
                return Err(OfferError::MissingPlan {
                    offer: target.offer_id.clone(),
                    plan: target.plan_id.clone(),
                })
            }
        },
    }
    let mut body = Map::new();
    for field in ["name", "type", "description"] {
        if let Some(value) = offer.get(field) {
            body.insert(field.into(), value.clone());
        }
    }
    body.insert("plans".into(), Value::Object(plans));
    body.insert("version".into(), version.into());
    Ok(Edit::Write(Value::Object(body)))
}

/// The resources of `plan` in `offer`, if it has that plan.
pub fn plan_resources(offer: &Value, plan: &str) -> Option<ResourceList> {
    offer
        .get("plans")?
        .get(plan)?
        .get("resources")
        .and_then(parse_resources)
}

fn new_plan(target: &Target, resources: &ResourceList) -> Value {
    let create = target.create.as_ref();
    json!({
        "name": create.map(|c| c.plan_name.as_str()).unwrap_or(target.plan_id.as_str()),
        "cost": create.map(|c| c.plan_cost.as_str()).unwrap_or("0"),
        "resources": resources_json(resources),
    })
}

fn resources_json(resources: &ResourceList) -> Value {
    json!(resources.to_strings())
}

/// A plan's resources as the catalog prints them; `None` if any value is
/// not a quantity (then the plan is rewritten rather than compared).
fn parse_resources(value: &Value) -> Option<ResourceList> {
    value
        .as_object()?
        .iter()
        .map(|(name, q)| {
            let q: Quantity = match q {
                Value::String(s) => s.parse().ok()?,
                Value::Number(n) => n.to_string().parse().ok()?,
                _ => return None,
            };
            Some((name.clone(), q))
        })
        .collect()
}

/// `cpu=4, memory=8Gi` for logs.
pub fn describe(resources: &ResourceList) -> String {
    if resources.0.is_empty() {
        return "(nothing)".into();
    }
    resources
        .0
        .iter()
        .map(|(name, q)| format!("{name}={q}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::CreateDefaults;

    fn list(pairs: &[(&str, &str)]) -> ResourceList {
        ResourceList::from_strings(pairs.iter().copied()).unwrap()
    }

    fn target(create: bool) -> Target {
        Target {
            offer_id: "o1".into(),
            plan_id: "small".into(),
            originator: String::new(),
            create: create.then(|| CreateDefaults {
                offer_name: "My offer".into(),
                offer_type: "compute".into(),
                offer_description: "live".into(),
                plan_name: "Small".into(),
                plan_cost: "2.5".into(),
            }),
        }
    }

    fn stored() -> Value {
        json!({
            "id": "o1", "name": "Offer one", "type": "storage", "description": "d",
            "clusterID": "c1", "clusterName": "one",
            "createdAt": "2024-01-01T00:00:00Z", "updatedAt": "2024-01-01T00:00:00Z",
            "version": 7,
            "plans": {
                "small": { "name": "plan-small", "planID": "s", "cost": "1.0",
                           "resources": { "cpu": "2", "memory": "4Gi" } },
                "large": { "name": "plan-large", "cost": "9.0",
                           "resources": { "cpu": "16" } }
            }
        })
    }

    #[test]
    fn replaces_only_the_plans_resources() {
        let new = list(&[("cpu", "3"), ("memory", "6Gi")]);
        let Edit::Write(body) = edit(Some(&stored()), &target(true), &new).unwrap() else {
            panic!("expected a write");
        };
        assert_eq!(
            body,
            json!({
                "name": "Offer one", "type": "storage", "description": "d", "version": 7,
                "plans": {
                    "small": { "name": "plan-small", "planID": "s", "cost": "1.0",
                               "resources": { "cpu": "3", "memory": "6Gi" } },
                    "large": { "name": "plan-large", "cost": "9.0",
                               "resources": { "cpu": "16" } }
                }
            })
        );
    }

    #[test]
    fn equal_quantities_in_another_spelling_are_unchanged() {
        let same = list(&[("cpu", "2000m"), ("memory", "4096Mi")]);
        assert_eq!(
            edit(Some(&stored()), &target(false), &same),
            Ok(Edit::Unchanged)
        );
        // A resource that disappears is a change.
        let fewer = list(&[("cpu", "2")]);
        assert!(matches!(
            edit(Some(&stored()), &target(false), &fewer),
            Ok(Edit::Write(_))
        ));
    }

    #[test]
    fn missing_offer_is_created_only_when_allowed() {
        let new = list(&[("cpu", "1")]);
        assert_eq!(
            edit(None, &target(false), &new),
            Err(OfferError::MissingOffer { offer: "o1".into() })
        );
        let Edit::Write(body) = edit(None, &target(true), &new).unwrap() else {
            panic!("expected a write");
        };
        assert_eq!(
            body,
            json!({
                "name": "My offer", "type": "compute", "description": "live", "version": 0,
                "plans": { "small": { "name": "Small", "cost": "2.5", "resources": { "cpu": "1" } } }
            })
        );
    }

    #[test]
    fn missing_plan_is_added_only_when_allowed() {
        let mut offer = stored();
        offer["plans"].as_object_mut().unwrap().remove("small");
        let new = list(&[("cpu", "1")]);
        let e = edit(Some(&offer), &target(false), &new).unwrap_err();
        assert!(e.is_fatal());
        assert!(e.to_string().contains("no plan small"), "{e}");
        let Edit::Write(body) = edit(Some(&offer), &target(true), &new).unwrap() else {
            panic!("expected a write");
        };
        assert_eq!(
            body["plans"]["small"],
            json!({ "name": "Small", "cost": "2.5", "resources": { "cpu": "1" } })
        );
        assert_eq!(body["plans"]["large"], stored()["plans"]["large"]);
    }

    #[test]
    fn unusable_offers_are_reported() {
        let new = list(&[("cpu", "1")]);
        let e = edit(Some(&json!({"plans": {}})), &target(true), &new).unwrap_err();
        assert!(!e.is_fatal());
        assert!(e.to_string().contains("version"), "{e}");
        // A value that is not a quantity is rewritten, not trusted.
        let mut offer = stored();
        offer["plans"]["small"]["resources"]["cpu"] = json!("lots");
        assert!(matches!(
            edit(
                Some(&offer),
                &target(true),
                &list(&[("cpu", "2"), ("memory", "4Gi")])
            ),
            Ok(Edit::Write(_))
        ));
    }

    #[test]
    fn reads_and_describes_plan_resources() {
        assert_eq!(
            plan_resources(&stored(), "small"),
            Some(list(&[("cpu", "2"), ("memory", "4Gi")]))
        );
        assert_eq!(plan_resources(&stored(), "none"), None);
        assert_eq!(
            describe(&list(&[("cpu", "2"), ("memory", "4Gi")])),
            "cpu=2, memory=4Gi"
        );
        assert_eq!(describe(&ResourceList::new()), "(nothing)");
    }
}
