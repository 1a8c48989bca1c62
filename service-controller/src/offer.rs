//! A service of a ServiceCatalog as the offer the catalog publishes
//! (`POST /offer/{id}`, kind `service`): its plans keyed by plan id, each
//! with its cost, resources, hosting policy and OSB schemas; and which
//! ServiceCatalog holds each offer id ([`holders`]). Pure.
//!
//! Every ServiceCatalog of the cluster publishes with the one provider
//! account, so all of them share the provider's offer ids (a customer
//! buys `db`, not `team/db`): two ServiceCatalogs declaring one id must
//! not take turns overwriting its offer, running their templates for
//! each other's instances or withdrawing each other's offer (issue 41,
//! C-03..C-05). The id belongs to the first created.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{json, Map, Value};

use crate::model::{Service, ServiceCatalog};

/// Which ServiceCatalog (`namespace/name`) holds each offer id its
/// services declare: among those not being deleted, the first created
/// (`creationTimestamp`, then `namespace/name`, so the answer is the same
/// after every restart and on every replica). A deleted holder hands its
/// ids to the next one declaring them.
pub fn holders<'a>(
    catalogs: impl IntoIterator<Item = &'a ServiceCatalog>,
) -> BTreeMap<String, String> {
    let mut live: Vec<(Option<&Time>, String, &ServiceCatalog)> = catalogs
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| (c.metadata.creation_timestamp.as_ref(), c.key(), c))
        .collect();
    // A catalog not yet stored has no timestamp: it comes last.
    live.sort_by(|a, b| (a.0.is_none(), a.0, &a.1).cmp(&(b.0.is_none(), b.0, &b.1)));
    let mut held = BTreeMap::new();
    for (_, key, catalog) in live {
        for service in &catalog.spec.services {
            held.entry(service.id.clone())
                .or_insert_with(|| key.clone());
        }
    }
    held
}

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
    use crate::model::{ServiceCatalogSpec, ServicePlan};

    /// ServiceCatalog `namespace/name` created at second `created` (None:
    /// not stored yet) declaring service ids `ids`.
    fn catalog(key: &str, created: Option<i64>, ids: &[&str]) -> ServiceCatalog {
        let (namespace, name) = key.split_once('/').unwrap();
        let mut c = ServiceCatalog::new(
            name,
            ServiceCatalogSpec {
                services: ids
                    .iter()
                    .map(|id| Service {
                        id: id.to_string(),
                        ..Service::default()
                    })
                    .collect(),
            },
        );
        c.metadata.namespace = Some(namespace.into());
        c.metadata.creation_timestamp =
            created.map(|s| Time(k8s_openapi::jiff::Timestamp::from_second(s).unwrap()));
        c
    }

    /// C-03..C-05 (issue 41): team-c's ServiceCatalog declaring team's
    /// `shared-db` does not hold it, whatever order the cache lists them
    /// in; it holds its own ids; a tie in time goes to namespace/name; a
    /// holder being deleted hands the id on.
    #[test]
    fn an_offer_id_is_held_by_the_first_created_service_catalog() {
        let team = catalog("team/shop", Some(100), &["shared-db", "cache"]);
        let team_c = catalog("team-c/shop", Some(200), &["shared-db", "queue"]);
        for order in [[&team, &team_c], [&team_c, &team]] {
            let held = holders(order);
            assert_eq!(held["shared-db"], "team/shop");
            assert_eq!(held["cache"], "team/shop");
            assert_eq!(held["queue"], "team-c/shop");
        }
        // The same second: namespace/name decides, in any order.
        let a = catalog("a/shop", Some(100), &["shared-db"]);
        assert_eq!(holders([&team, &a])["shared-db"], "a/shop");
        assert_eq!(holders([&a, &team])["shared-db"], "a/shop");
        // Not stored yet: after every stored one.
        let unstored = catalog("0/first", None, &["shared-db"]);
        assert_eq!(holders([&unstored, &team_c])["shared-db"], "team-c/shop");
        // The holder being deleted: the next in line holds the id.
        let mut leaving = team.clone();
        leaving.metadata.deletion_timestamp = team_c.metadata.creation_timestamp.clone();
        assert_eq!(holders([&leaving, &team_c])["shared-db"], "team-c/shop");
        assert!(!holders([&leaving, &team_c]).contains_key("cache"));
    }

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
