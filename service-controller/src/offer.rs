//! A service of a ServiceCatalog as the offer the catalog publishes
//! (`POST /offer/{id}`, kind `service`): its plans keyed by plan id, each
//! with its cost, resources, hosting policy and OSB schemas. Pure.

use serde_json::{json, Map, Value};

use crate::model::Service;

/// The offer body for `service`.
pub fn offer(service: &Service) -> Value {
    let plans: Map<String, Value> = service
        .plans
        .iter()
        .map(|plan| {
            let mut body = json!({
                "name": plan.name,
                "cost": plan.cost,
                "resources": plan.resources,
                "hosting": plan.hosting,
            });
            if let Some(schemas) = &plan.schemas {
                body["schemas"] = schemas.clone();
            }
            (plan.id.clone(), body)
        })
        .collect();
    json!({
        "name": service.name,
        "type": service.service_type,
        "kind": "service",
        "description": service.description,
        "plans": plans,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ServicePlan;

    #[test]
    fn a_service_is_an_offer_of_kind_service_with_its_plans() {
        let service = Service {
            id: "mysql".into(),
            name: "MySQL".into(),
            service_type: "database".into(),
            plans: vec![ServicePlan {
                id: "remote".into(),
                name: "Remote".into(),
                cost: "3".into(),
                hosting: "Remote".into(),
                schemas: Some(json!({"service_instance": {}})),
                ..ServicePlan::default()
            }],
            ..Service::default()
        };
        let o = offer(&service);
        assert_eq!(o["kind"], "service");
        assert_eq!(o["type"], "database");
        assert_eq!(o["plans"]["remote"]["hosting"], "Remote");
        assert_eq!(o["plans"]["remote"]["cost"], "3");
        assert_eq!(
            o["plans"]["remote"]["schemas"],
            json!({"service_instance": {}})
        );
    }
}
