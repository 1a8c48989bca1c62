//! The third source of a Purchase: `spec.peeringCredentialsSecretRef`, the
//! kubeconfig of a Liqo peering user on the remote cluster (as `liqoctl
//! generate peering-user` makes it), with `spec.resources` and
//! `spec.resourceSliceClass`. No catalog takes part: what a catalog
//! contract would say is made here — the remote cluster's ID (read from
//! its Liqo cluster-ID ConfigMap through the peering user, as `liqoctl
//! peer` reads it), the resources, the class, the kubeconfig — and the
//! rest of the set-up (the cluster module's `set_up`) is the one of a catalog
//! purchase. The service-controller peers towards its customers this way.

use catalog_client::wire::{Contract, ContractCredentials, LiqoGeneration, V1Credentials};
use controller_core::bounded::Exceeded;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Client;
use quantity::ResourceList;

use crate::authentication;
use crate::decision::{self, Assessment, Unusable};
use crate::liqo::Generation;
use crate::model::{Purchase, SecretKeyRef};
use crate::secret_ref;

/// Whether the Purchase peers from given credentials (no catalog).
pub fn is_direct(purchase: &Purchase) -> bool {
    purchase.spec.peering_credentials_secret_ref.is_some()
}

/// The spec of a direct Purchase, checked: the reference, the resources
/// as a ResourceList. A Purchase naming a catalog source too is refused
/// (the CRD's rule says so; a controller reading an older CRD checks
/// again).
pub fn check_spec(
    purchase: &Purchase,
    ours: Generation,
) -> Result<(&SecretKeyRef, ResourceList), Unusable> {
    let spec = &purchase.spec;
    let Some(reference) = &spec.peering_credentials_secret_ref else {
        return Err(Unusable::Spec(
            "spec.peeringCredentialsSecretRef is not set".to_string(),
        ));
    };
    if spec.contract_id.is_some() || spec.offer_id.is_some() || spec.plan_id.is_some() {
        return Err(Unusable::Spec(
            "spec.peeringCredentialsSecretRef excludes spec.contractID, spec.offerID and spec.planID: set exactly one source".to_string(),
        ));
    }
    if ours != Generation::V1 {
        return Err(Unusable::Spec(
            "spec.peeringCredentialsSecretRef needs Liqo v1 (a peering-user kubeconfig); this cluster runs Liqo v0".to_string(),
        ));
    }
    Ok((reference, resources(&spec.resources)?))
}

/// `spec.resources` as a ResourceList; a value that is no quantity is
/// named.
pub fn resources(
    spec: &std::collections::BTreeMap<String, IntOrString>,
) -> Result<ResourceList, Unusable> {
    let texts: Vec<(String, String)> = spec
        .iter()
        .map(|(k, v)| {
            let text = match v {
                IntOrString::Int(i) => i.to_string(),
                IntOrString::String(s) => s.clone(),
            };
            (k.clone(), text)
        })
        .collect();
    ResourceList::from_strings(texts.iter().map(|(k, v)| (k.as_str(), v.as_str()))).map_err(
        |(key, error)| Unusable::Spec(format!("spec.resources.{key} is not a quantity: {error}")),
    )
}

/// What a catalog contract would hold for this Purchase: the remote
/// cluster's ID, the resources and class of the spec, the kubeconfig.
pub fn contract(
    purchase: &Purchase,
    remote_cluster_id: String,
    resources: ResourceList,
    kubeconfig: String,
) -> Contract {
    Contract {
        id: purchase.metadata.uid.clone().unwrap_or_default(),
        cluster_id: remote_cluster_id,
        resources,
        resource_slice_class: purchase
            .spec
            .resource_slice_class
            .clone()
            .unwrap_or_default(),
        liqo: vec![LiqoGeneration::V1],
        active: true,
        credentials: Some(ContractCredentials {
            v1: Some(V1Credentials { kubeconfig }),
            ..ContractCredentials::default()
        }),
        ..Contract::default()
    }
}

/// Read the peering user's kubeconfig and, through it, the remote
/// cluster's ID in `remote_liqo_namespace` (`known`, from the status, while
/// the remote cluster does not answer); the contract to set up.
pub async fn read(
    client: &Client,
    purchase: &Purchase,
    ours: Generation,
    remote_liqo_namespace: &str,
    known: Option<&str>,
) -> Result<Contract, Unusable> {
    let (reference, resources) = check_spec(purchase, ours)?;
    let (secret, where_) = secret_ref::read(
        client,
        purchase,
        reference,
        "peering credentials",
        Unusable::Credentials,
    )
    .await?;
    let kubeconfig = secret_ref::text(&secret, &reference.key).ok_or_else(|| {
        Unusable::Credentials(format!(
            "peering credentials Secret {where_} has no non-empty key {:?}",
            reference.key
        ))
    })?;
    let remote = authentication::provider_client(&kubeconfig)
        .await
        .map_err(|e| {
            Unusable::Credentials(format!(
                "peering credentials Secret {where_}, key {:?}: {e}",
                reference.key
            ))
        })?;
    let id = known_if_unreachable(
        remote_cluster_id(&remote, remote_liqo_namespace).await,
        known,
    )?;
    Ok(contract(purchase, id, resources, kubeconfig))
}

/// The remote cluster's ID as read, or — when it does not answer — as
/// known from an earlier round: a peering that works goes on working
/// while the remote API server is away (Liqo's own links are not this
/// controller's to judge), as a catalog purchase goes on from the contract
/// last read.
pub fn known_if_unreachable(
    read: Result<String, Unusable>,
    known: Option<&str>,
) -> Result<String, Unusable> {
    match (read, known) {
        (Err(Unusable::RemoteUnreachable(why)), Some(known)) => {
            tracing::warn!(
                why,
                "the remote cluster does not answer: going on with its known ID"
            );
            Ok(known.to_string())
        }
        (read, _) => read,
    }
}

/// The remote cluster's Liqo cluster ID, as `liqoctl peer` reads it
/// (`utils/cluster_info.go:61-78`); an unreachable cluster is waited for.
async fn remote_cluster_id(remote: &Client, liqo_namespace: &str) -> Result<String, Unusable> {
    match crate::cluster_id::read(remote, liqo_namespace).await {
        Ok(read) => read.map_err(|why| Unusable::Credentials(format!("the remote cluster: {why}"))),
        // Cut off by a bound (too large, too slow): said as such, and
        // retried like an unreachable cluster.
        Err(e) if Exceeded::find(&e).is_some() => Err(Unusable::RemoteUnreachable(
            Exceeded::find(&e).map_or_else(String::new, |bound| {
                crate::authentication::answer_refused("read its Liqo cluster ID", bound)
            }),
        )),
        Err(kube::Error::Api(e)) => Err(Unusable::Credentials(format!(
            "the remote cluster refused to show its Liqo cluster ID in {liqo_namespace} to the peering user (HTTP {}): {}",
            e.code, e.message
        ))),
        Err(other) => Err(Unusable::RemoteUnreachable(format!(
            "cannot reach the remote cluster: {other}"
        ))),
    }
}

/// A direct Purchase's assessment: no catalog took part, so none is
/// reachable or hears a state, and what is valid is the credentials, not
/// a contract.
pub fn without_catalog(mut assessment: Assessment) -> Assessment {
    assessment
        .conditions
        .retain(|c| c.type_ != decision::CATALOG_REACHABLE);
    for condition in &mut assessment.conditions {
        if condition.type_ == decision::CONTRACT_VALID {
            condition.type_ = decision::CREDENTIALS_VALID;
            if condition.status {
                condition.reason = "PeeringCredentialsUsable".to_string();
                condition.message =
                    "the peering user's kubeconfig reaches the remote cluster".to_string();
            }
        }
    }
    assessment.report = None;
    assessment
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::PurchaseSpec;

    fn direct(spec: serde_json::Value) -> Purchase {
        let mut full = serde_json::json!({
            "peeringCredentialsSecretRef": {"name": "peer", "key": "kubeconfig"}});
        for (k, v) in spec.as_object().unwrap() {
            full[k] = v.clone();
        }
        let spec: PurchaseSpec = serde_json::from_value(full).unwrap();
        let mut p = Purchase::new("svc", spec);
        p.metadata.namespace = Some("team".into());
        p.metadata.uid = Some("u-1".into());
        p
    }

    #[test]
    fn a_direct_spec_has_one_source_liqo_v1_and_quantities() {
        let p = direct(serde_json::json!({"resources": {"cpu": 2, "memory": "4Gi"}}));
        assert!(is_direct(&p));
        let (reference, resources) = check_spec(&p, Generation::V1).unwrap();
        assert_eq!(reference.name, "peer");
        assert_eq!(resources.to_strings()["cpu"], "2");
        assert_eq!(resources.to_strings()["memory"], "4Gi");

        let both = direct(serde_json::json!({"contractID": "c"}));
        let Err(Unusable::Spec(m)) = check_spec(&both, Generation::V1) else {
            panic!("two sources accepted")
        };
        assert!(m.contains("exactly one"), "{m}");
        assert!(matches!(
            check_spec(&p, Generation::V0),
            Err(Unusable::Spec(m)) if m.contains("Liqo v1")
        ));
        let bad = direct(serde_json::json!({"resources": {"memory": "lots"}}));
        assert!(matches!(
            check_spec(&bad, Generation::V1),
            Err(Unusable::Spec(m)) if m.contains("spec.resources.memory")
        ));
    }

    #[test]
    fn the_contract_is_made_of_the_spec_and_the_remote_id() {
        let p = direct(serde_json::json!({"resourceSliceClass": "liqo-broker"}));
        let list = ResourceList::from_strings([("cpu", "1")]).unwrap();
        let c = contract(&p, "remote-1".into(), list, "apiVersion: v1".into());
        assert_eq!(c.cluster_id, "remote-1");
        assert_eq!(c.id, "u-1");
        assert_eq!(c.resource_slice_class, "liqo-broker");
        assert!(c.active);
        assert_eq!(
            c.credentials.unwrap().v1.unwrap().kubeconfig,
            "apiVersion: v1"
        );
        assert_eq!(
            decision::check_contract(
                &contract(&p, "r".into(), ResourceList::default(), "k".into()),
                Generation::V1,
                "me"
            ),
            Ok(())
        );
    }

    #[test]
    fn an_unreachable_remote_cluster_is_known_from_before() {
        let away = || Err(Unusable::RemoteUnreachable("timeout".into()));
        assert_eq!(known_if_unreachable(away(), Some("r")), Ok("r".into()));
        assert!(matches!(
            known_if_unreachable(away(), None),
            Err(Unusable::RemoteUnreachable(_))
        ));
        assert_eq!(
            known_if_unreachable(Ok("new".into()), Some("r")),
            Ok("new".into())
        );
        // A refusal is not an outage.
        let refused = Err(Unusable::Credentials("403".into()));
        assert!(matches!(
            known_if_unreachable(refused, Some("r")),
            Err(Unusable::Credentials(_))
        ));
    }

    #[test]
    fn no_catalog_is_reachable_or_told() {
        let unusable = decision::assess_unusable(&Unusable::NoCredentials(Generation::V1));
        assert!(unusable.report.is_some());
        let plain = without_catalog(unusable);
        assert!(plain.report.is_none());
        assert!(
            plain
                .conditions
                .iter()
                .all(|c| c.type_ != decision::CATALOG_REACHABLE
                    && c.type_ != decision::CONTRACT_VALID)
        );
        assert!(plain
            .conditions
            .iter()
            .any(|c| c.type_ == decision::CREDENTIALS_VALID && !c.status));
    }
}
