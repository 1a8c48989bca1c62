//! The `pods/eviction` subresource: a POST of a policy/v1 (or v1beta1)
//! `Eviction` deletes a pod unless a PodDisruptionBudget forbids it. As
//! Kubernetes v1.31.0's `EvictionREST.Create`
//! (`pkg/registry/core/pod/storage/eviction.go`) serves it:
//!
//! - the Eviction's name must be the URL's (400 "name in URL does not
//!   match name in Eviction object"); its `deleteOptions.dryRun` and the
//!   request's `dryRun` are merged (`propagateDryRun`: both set and
//!   different is an error); a missing pod is the pod's 404;
//! - a pod that is `Succeeded`, `Failed` or `Pending`, or already being
//!   deleted, is deleted without looking at budgets (`canIgnorePDB`);
//! - otherwise every PodDisruptionBudget of the pod's namespace whose
//!   selector (neither missing nor empty: "it should match nothing, not
//!   everything") selects the pod counts (`getPodDisruptionBudgets`): more
//!   than one is answered 500 "This pod has more than one
//!   PodDisruptionBudget, which the eviction subresource does not
//!   support."; none lets the pod go;
//! - with one: a pod that is not Ready goes without touching the budget
//!   when the budget's `unhealthyPodEvictionPolicy` is `AlwaysAllow`, or
//!   the budget is met (`currentHealthy >= desiredHealthy > 0`); else
//!   `checkAndDecrement`: a status older than the budget's generation is a
//!   429 `TooManyRequests` ("… is still being processed by the server.",
//!   `Retry-After: 10`), a negative `disruptionsAllowed` or more than 2,000
//!   `disruptedPods` a 403, `disruptionsAllowed` 0 a 429 "Cannot evict pod
//!   as it would violate the pod's disruption budget." with the cause
//!   `DisruptionBudget` "The disruption budget <name> needs <desired>
//!   healthy pods and has <current> currently"; else `disruptionsAllowed`
//!   goes down by one (the `DisruptionAllowed` condition with it when it
//!   reaches 0) and — unless dry run — the pod is written into
//!   `disruptedPods` with the time, through the status subresource;
//! - the pod is then deleted with the Eviction's `deleteOptions` (a
//!   `resourceVersion` precondition added when the budget was not
//!   consulted for a not-Ready pod, or the pod was not terminal), after
//!   the `DisruptionTarget` condition (`EvictionByEvictionAPI`, "Eviction
//!   API: evicting") is set on it (`addConditionAndDeletePod`); a dry run
//!   deletes nothing;
//! - the answer: a `Status` `Success`, code 201.
//!
//! The retries on conflicts (`EvictionsRetry`) have nothing to retry
//! here: the server writes under one lock. Admission plugins and webhooks
//! are not called for the `Eviction` itself (none in this server match
//! `pods/eviction`); the pod's DELETE goes through admission as any.

use serde_json::{json, Value};

use crate::crd::ResourceDef;
use crate::disruption::{set_condition, update_disruption_allowed_condition};
use crate::rbac::UserInfo;
use crate::status::ApiError;
use crate::store::{Deleter, Target, World};
use crate::workload as w;

/// `MaxDisruptedPodSize`.
pub const MAX_DISRUPTED_POD_SIZE: usize = 2000;

/// The `Retry-After` of a budget still being processed
/// (`createTooManyRequestsError`).
const PROCESSING_RETRY_SECONDS: u64 = 10;

/// `policyv1.DisruptionBudgetCause`.
pub const DISRUPTION_BUDGET_CAUSE: &str = "DisruptionBudget";

const VIOLATES: &str = "Cannot evict pod as it would violate the pod's disruption budget.";

/// `errors.NewTooManyRequests` with a `DisruptionBudget` cause.
fn too_many_requests(retry_after: u64, cause: String) -> ApiError {
    let mut details = json!({"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]});
    if retry_after > 0 {
        details["retryAfterSeconds"] = json!(retry_after);
    }
    ApiError::new(429, "TooManyRequests", VIOLATES).with_details(details)
}

/// `createTooManyRequestsError`.
fn still_processing(pdb: &str) -> ApiError {
    too_many_requests(
        PROCESSING_RETRY_SECONDS,
        format!("The disruption budget {pdb} is still being processed by the server."),
    )
}

/// `errors.NewForbidden(policy.Resource("poddisruptionbudget"), name, err)`.
fn forbidden(pdb: &str, why: &str) -> ApiError {
    ApiError::new(
        403,
        "Forbidden",
        format!("poddisruptionbudget.policy \"{pdb}\" is forbidden: {why}"),
    )
    .with_details(json!({"name": pdb, "group": "policy", "kind": "poddisruptionbudget"}))
}

/// The `Status` of a successful eviction.
fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// The dry-run values of the request (`?dryRun=All`, repeated or not).
pub fn query_dry_run(value: Option<&str>) -> Vec<String> {
    value
        .into_iter()
        .flat_map(|v| v.split(','))
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// `propagateDryRun`: the Eviction's delete options, with the request's
/// dry run when they have none.
fn propagate_dry_run(eviction: &Value, options_dry_run: &[String]) -> Result<Value, ApiError> {
    let mut delete_options = match &eviction["deleteOptions"] {
        Value::Object(o) => Value::Object(o.clone()),
        _ => json!({}),
    };
    let body_dry_run: Vec<String> = delete_options["dryRun"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    if body_dry_run.is_empty() {
        if !options_dry_run.is_empty() {
            delete_options["dryRun"] = json!(options_dry_run);
        }
        return Ok(delete_options);
    }
    if options_dry_run.is_empty() || options_dry_run == body_dry_run.as_slice() {
        return Ok(delete_options);
    }
    Err(ApiError::new(
        500,
        "InternalError",
        format!(
            "Internal error occurred: Non-matching dry-run options in request and content: [{}] and [{}]",
            options_dry_run.join(" "),
            body_dry_run.join(" ")
        ),
    ))
}

/// `ValidateDryRun` (`staging/src/k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go`):
/// `All` is the one value.
fn validate_dry_run(values: &[String]) -> Result<bool, ApiError> {
    match values {
        [] => Ok(false),
        values if values.iter().all(|v| v == "All") => Ok(true),
        values => Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "DeleteOptions.meta.k8s.io \"\" is invalid: dryRun: Unsupported value: []string{{{}}}: supported values: \"All\"",
                values.iter().map(|v| format!("{v:?}")).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// `canIgnorePDB`.
fn can_ignore_pdb(pod: &Value) -> bool {
    matches!(w::phase(pod), "Succeeded" | "Failed" | "Pending") || w::deleting(pod)
}

/// `shouldEnforceResourceVersion`.
fn should_enforce_resource_version(pod: &Value) -> bool {
    !matches!(w::phase(pod), "Succeeded" | "Failed") && !w::deleting(pod)
}

fn resource_version_unset(options: &Value) -> bool {
    options["preconditions"]["resourceVersion"].is_null()
}

fn with_resource_version(mut options: Value, pod: &Value) -> Value {
    options["preconditions"]["resourceVersion"] = pod["metadata"]["resourceVersion"].clone();
    options
}

/// Evict pod `namespace/name` as `requester` asked with `eviction` (the
/// decoded body) and the request's dry-run values: the `Status` answered
/// (201), or the error.
pub fn evict(
    world: &mut World,
    pods: &ResourceDef,
    namespace: &str,
    name: &str,
    eviction: &Value,
    dry_run: &[String],
    requester: Option<&UserInfo>,
) -> Result<Value, ApiError> {
    match (eviction["apiVersion"].as_str(), eviction["kind"].as_str()) {
        (None | Some("policy/v1" | "policy/v1beta1"), None | Some("Eviction")) => {}
        (version, kind) => {
            return Err(ApiError::bad_request(format!(
                "not a Eviction object: {}, Kind={}",
                version.unwrap_or_default(),
                kind.unwrap_or_default()
            )))
        }
    }
    if eviction["metadata"]["name"].as_str().unwrap_or_default() != name {
        return Err(ApiError::bad_request(
            "name in URL does not match name in Eviction object",
        ));
    }
    let original = propagate_dry_run(eviction, dry_run)?;
    let dry_run = validate_dry_run(
        &original["dryRun"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect::<Vec<_>>(),
    )?;
    let pod = world.get(pods, Some(namespace), name)?;
    let delete = |world: &mut World, options: Value| {
        delete_pod(world, pods, &pod, options, dry_run, requester).map(|()| success())
    };
    if can_ignore_pdb(&pod) {
        let options = if should_enforce_resource_version(&pod) && resource_version_unset(&original)
        {
            with_resource_version(original.clone(), &pod)
        } else {
            original.clone()
        };
        return delete(world, options);
    }
    let budgets = budgets_of(world, &pod);
    let pdb = match budgets.as_slice() {
        [] => return delete(world, original),
        [pdb] => pdb.clone(),
        _ => {
            return Err(ApiError::new(
                500,
                "",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ))
        }
    };
    let status = &pdb["status"];
    if !w::is_ready(&pod) {
        let always_allow = pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow";
        let desired = status["desiredHealthy"].as_i64().unwrap_or(0);
        let budget_met = status["currentHealthy"].as_i64().unwrap_or(0) >= desired && desired > 0;
        if always_allow || budget_met {
            // Not counted as healthy: the budget is not decremented, and
            // the pod must not have turned Ready meanwhile.
            let options = with_resource_version(original.clone(), &pod);
            return delete(world, options).map_err(|e| {
                if e.code == 409 && resource_version_unset(&original) {
                    still_processing(w::name(&pdb))
                } else {
                    e
                }
            });
        }
    }
    check_and_decrement(world, &pdb, name, dry_run)?;
    delete(world, original)
}

/// `getPodDisruptionBudgets`: the budgets of the pod's namespace whose
/// selector is valid, not empty, and selects the pod.
fn budgets_of(world: &World, pod: &Value) -> Vec<Value> {
    world
        .list_objects(&w::pod_disruption_budgets())
        .into_iter()
        .filter(|pdb| w::namespace(pdb) == w::namespace(pod))
        .filter(|pdb| {
            let selector = &pdb["spec"]["selector"];
            !w::selector_is_empty(selector) && w::selects(selector, pod)
        })
        .collect()
}

/// `checkAndDecrement`.
fn check_and_decrement(
    world: &mut World,
    pdb: &Value,
    pod: &str,
    dry_run: bool,
) -> Result<(), ApiError> {
    let name = w::name(pdb);
    let status = &pdb["status"];
    if status["observedGeneration"].as_i64().unwrap_or(0) < w::generation(pdb) {
        return Err(still_processing(name));
    }
    let allowed = status["disruptionsAllowed"].as_i64().unwrap_or(0);
    if allowed < 0 {
        return Err(forbidden(name, "pdb disruptions allowed is negative"));
    }
    let disrupted = status["disruptedPods"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    if disrupted.len() > MAX_DISRUPTED_POD_SIZE {
        return Err(forbidden(
            name,
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        ));
    }
    if allowed == 0 {
        return Err(too_many_requests(
            0,
            format!(
                "The disruption budget {name} needs {} healthy pods and has {} currently",
                status["desiredHealthy"].as_i64().unwrap_or(0),
                status["currentHealthy"].as_i64().unwrap_or(0)
            ),
        ));
    }
    let now = crate::store::now();
    let mut updated = pdb.clone();
    updated["status"]["disruptionsAllowed"] = json!(allowed - 1);
    if allowed - 1 == 0 {
        update_disruption_allowed_condition(&mut updated["status"], &now);
    }
    if dry_run {
        return Ok(());
    }
    updated["status"]["disruptedPods"][pod] = json!(now);
    let Some(def) = world.registry.get(&w::pod_disruption_budgets()) else {
        return Err(ApiError::new(
            500,
            "InternalError",
            "poddisruptionbudgets are not served",
        ));
    };
    world
        .update(&def, Some(w::namespace(pdb)), name, updated, Target::Status)
        .map(|_| ())
}

/// `addConditionAndDeletePod`: the `DisruptionTarget` condition, then the
/// DELETE with `options` (its `resourceVersion` precondition moved to the
/// pod the condition wrote, as the source bumps it); a dry run does
/// neither, only what would refuse the DELETE.
fn delete_pod(
    world: &mut World,
    pods: &ResourceDef,
    pod: &Value,
    mut options: Value,
    dry_run: bool,
    requester: Option<&UserInfo>,
) -> Result<(), ApiError> {
    let namespace = w::namespace(pod).to_string();
    let name = w::name(pod).to_string();
    if let Some(rv) = options["preconditions"]["resourceVersion"].as_str() {
        if Some(rv) != pod["metadata"]["resourceVersion"].as_str() {
            let why = format!(
                "the ResourceVersion in the precondition ({rv}) does not match the ResourceVersion in record ({}). The object might have been modified",
                pod["metadata"]["resourceVersion"].as_str().unwrap_or_default()
            );
            return Err(ApiError::conflict(pods, &name, &why));
        }
    }
    if let Some(uid) = options["preconditions"]["uid"].as_str() {
        if uid != w::uid(pod) {
            let why = format!(
                "the UID in the precondition ({uid}) does not match the UID in record ({}). The object might have been deleted and then recreated",
                w::uid(pod)
            );
            return Err(ApiError::conflict(pods, &name, &why));
        }
    }
    if dry_run {
        return Ok(());
    }
    let mut marked = pod.clone();
    let mut conditions = marked["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    set_condition(
        &mut conditions,
        json!({"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
               "message": "Eviction API: evicting"}),
        &crate::store::now(),
    );
    marked["status"]["conditions"] = Value::Array(conditions);
    let written = world.update(pods, Some(&namespace), &name, marked, Target::Status)?;
    if !resource_version_unset(&options) {
        options["preconditions"]["resourceVersion"] =
            written["metadata"]["resourceVersion"].clone();
    }
    if let Some(map) = options.as_object_mut() {
        // Carried out above; the store's DELETE takes none.
        map.remove("dryRun");
    }
    let deleter = Deleter {
        requester,
        collection: false,
    };
    world
        .delete_by(pods, Some(&namespace), &name, &options, deleter)
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dry_run_is_propagated_as_the_source_does() {
        let all = vec!["All".to_string()];
        let none: Vec<String> = Vec::new();
        let plain = json!({"metadata": {"name": "p"}});
        assert_eq!(
            propagate_dry_run(&plain, &all).unwrap()["dryRun"],
            json!(["All"])
        );
        assert!(propagate_dry_run(&plain, &none).unwrap()["dryRun"].is_null());
        let body = json!({"metadata": {"name": "p"}, "deleteOptions": {"dryRun": ["All"]}});
        assert_eq!(
            propagate_dry_run(&body, &none).unwrap()["dryRun"],
            json!(["All"])
        );
        assert!(propagate_dry_run(&body, &all).is_ok());
        let odd = vec!["Some".to_string()];
        let error = propagate_dry_run(&body, &odd).unwrap_err();
        assert!(
            error.message.contains("Non-matching dry-run options"),
            "{error}"
        );
    }

    fn world_with_budget() -> (World, Value) {
        let mut registry = crate::crd::Registry::default();
        for def in crate::builtin::definitions() {
            registry.register(def);
        }
        let mut world = World::new(registry, tokio::sync::broadcast::channel(64).0);
        let ns = world
            .registry
            .get(&crate::crd::GroupResource::new("", "namespaces"))
            .unwrap();
        world
            .create(&ns, None, json!({"metadata": {"name": "ns"}}))
            .unwrap();
        let def = world.registry.get(&w::pod_disruption_budgets()).unwrap();
        // A client's status on create is dropped, as the strategy drops it.
        let pdb = world
            .create(
                &def,
                Some("ns"),
                json!({"metadata": {"name": "b"}, "spec": {"minAvailable": 1},
                       "status": {"disruptionsAllowed": 5}}),
            )
            .unwrap();
        assert_eq!(pdb["metadata"]["generation"], 1);
        assert!(pdb["status"].is_null());
        (world, pdb)
    }

    fn set_status(world: &mut World, status: Value) -> Value {
        let def = world.registry.get(&w::pod_disruption_budgets()).unwrap();
        let mut pdb = world.get(&def, Some("ns"), "b").unwrap();
        pdb["status"] = status;
        world
            .update(&def, Some("ns"), "b", pdb, Target::Status)
            .unwrap()
    }

    #[test]
    fn a_budget_is_checked_and_decremented_as_the_source_does() {
        let (mut world, pdb) = world_with_budget();
        // Not yet observed: 429, retry in 10 s.
        let e = check_and_decrement(&mut world, &pdb, "p", false).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (429, VIOLATES));
        assert_eq!(e.details.as_ref().unwrap()["retryAfterSeconds"], 10);
        assert_eq!(
            e.details.as_ref().unwrap()["causes"][0]["message"],
            "The disruption budget b is still being processed by the server."
        );
        let pdb = set_status(
            &mut world,
            json!({"observedGeneration": 1, "disruptionsAllowed": 1, "desiredHealthy": 1,
                   "currentHealthy": 2, "expectedPods": 2}),
        );
        // A dry run decrements nothing stored.
        check_and_decrement(&mut world, &pdb, "p", true).unwrap();
        let def = world.registry.get(&w::pod_disruption_budgets()).unwrap();
        let stored = world.get(&def, Some("ns"), "b").unwrap();
        assert_eq!(stored["status"]["disruptionsAllowed"], 1);
        check_and_decrement(&mut world, &stored, "p", false).unwrap();
        let stored = world.get(&def, Some("ns"), "b").unwrap();
        assert_eq!(stored["status"]["disruptionsAllowed"], 0);
        assert!(stored["status"]["disruptedPods"]["p"].is_string());
        assert_eq!(
            stored["status"]["conditions"][0]["reason"],
            "InsufficientPods"
        );
        let e = check_and_decrement(&mut world, &stored, "q", false).unwrap_err();
        assert_eq!(e.code, 429);
        assert!(e
            .details
            .as_ref()
            .unwrap()
            .get("retryAfterSeconds")
            .is_none());
        assert_eq!(
            e.details.as_ref().unwrap()["causes"][0],
            json!({"reason": "DisruptionBudget",
                   "message": "The disruption budget b needs 1 healthy pods and has 2 currently"})
        );
        let negative = set_status(
            &mut world,
            json!({"observedGeneration": 1, "disruptionsAllowed": -1}),
        );
        let e = check_and_decrement(&mut world, &negative, "q", false).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (403, "poddisruptionbudget.policy \"b\" is forbidden: pdb disruptions allowed is negative")
        );
    }

    #[test]
    fn terminal_pending_and_deleting_pods_skip_the_budget() {
        for phase in ["Succeeded", "Failed", "Pending"] {
            assert!(can_ignore_pdb(&json!({"status": {"phase": phase}})));
        }
        assert!(!can_ignore_pdb(&json!({"status": {"phase": "Running"}})));
        assert!(can_ignore_pdb(
            &json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
            "status": {"phase": "Running"}})
        ));
    }
}
