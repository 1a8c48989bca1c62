//! A Liqo v1 contract's peering credentials, the rules written once (pure).
//!
//! A Liqo v1 peering user works for exactly one consumer cluster: its
//! RoleBindings exist only in `liqo-tenant-<consumer>` (`liqoctl generate
//! peering-user --consumer-cluster-id`, Liqo v1.2.0
//! pkg/liqoctl/rest/peering-user/generate.go). So:
//!
//! - a purchase from a provider serving Liqo v1 names the consumer's Liqo
//!   cluster ID ([`require_cluster_id`]), checked as Liqo checks it;
//! - each such contract gets its own kubeconfig, attached by the provider
//!   (`PUT /provider/contracts/{id}/peering`, [`attach_step`]) and released
//!   only to the contract's consumer while it is active; until then the
//!   contract reads `awaitingCredentials` ([`state`]);
//! - a provider that declared itself single-consumer gives every contract
//!   its registered kubeconfig, as do contracts bought before per-contract
//!   credentials existed (they carry no [`ContractV1`]: upgrade in place);
//! - an attached kubeconfig wins over the provider's registered one.

use chrono::{DateTime, Utc};

use crate::buying::model::{contract_change, ContractV1, Reservation, Step};
use crate::http::FieldError;
use crate::providers::LiqoGeneration;

pub use catalog_client::wire::contract::{ContractPeering, PeeringState};

/// The longest consumer cluster ID a peering user can be made for (P-18):
/// its objects carry the label `liqo.io/peering-user-name:
/// liqo-peer-user-<id>` (Liqo v1.2.0
/// pkg/liqoctl/rest/peering-user/userfactory/cert.go:166, roles.go:101),
/// and a label value is at most 63 characters (apimachinery
/// pkg/util/validation/validation.go `LabelValueMaxLength`), so 63 − 15;
/// that also keeps `liqo-tenant-<id>` (pkg/tenantNamespace/const.go:19 `NamePrefix`)
/// within a namespace name's 63.
pub const MAX_V1_CLUSTER_ID_LEN: usize = 48;

/// A consumer cluster ID as Liqo v1 accepts it: a DNS-1123 label (Liqo
/// v1.2.0 pkg/utils/args/cluster-identity.go `Read`: "may only contain
/// lowercase letters, numbers and hyphens, and must not be longer than 63
/// characters"; the ForeignCluster CRD's `ClusterID` pattern
/// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`, apis/core/v1beta1/foreigncluster_types.go).
pub fn check_v1_cluster_id(id: &str) -> Result<(), FieldError> {
    if catalog_client::wire::names::is_dns_label(id) && id.len() <= MAX_V1_CLUSTER_ID_LEN {
        return Ok(());
    }
    Err(FieldError::new(
        "consumerClusterID",
        format!("`{id}` is not a Liqo v1 cluster ID a peering user can be made for: 1 to {MAX_V1_CLUSTER_ID_LEN} lower-case letters, digits and hyphens, starting and ending with a letter or digit (a DNS-1123 label, as liqoctl and the ForeignCluster CRD require, short enough that the peering user's label `liqo-peer-user-<id>` and its namespace `liqo-tenant-<id>` can exist)"),
    ))
}

/// Whether a purchase from provider `provider` peering with `liqo` may
/// name `cluster_id`: a v1 provider needs it (its peering user is made for
/// that one cluster), as Liqo v1 spells cluster IDs.
pub fn require_cluster_id(
    provider: &str,
    liqo: &[LiqoGeneration],
    cluster_id: Option<&str>,
) -> Result<(), FieldError> {
    if !liqo.contains(&LiqoGeneration::V1) {
        return Ok(());
    }
    match cluster_id {
        Some(id) => check_v1_cluster_id(id),
        None => Err(FieldError::new(
            "consumerClusterID",
            format!("is required: provider {provider} peers with Liqo v1, whose peering user serves exactly one consumer cluster, so the contract must name yours (its Liqo cluster ID, e.g. from `liqoctl info`)"),
        )),
    }
}

/// The [`ContractV1`] a purchase records: None without v1; else whether
/// the provider's registered kubeconfig goes to it (`shares`: declared
/// single-consumer) or it awaits its own.
pub fn initial(liqo: &[LiqoGeneration], shares: bool) -> Option<ContractV1> {
    liqo.contains(&LiqoGeneration::V1).then_some(ContractV1 {
        single_consumer: shares,
        sealed_kubeconfig: None,
        attached_at: None,
    })
}

/// Where contract `r`'s v1 kubeconfig comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source<'a> {
    /// No v1, or not attached yet.
    Nothing,
    /// The provider's registered kubeconfig (single-consumer, or a
    /// contract bought before per-contract credentials).
    Provider,
    /// Its own, sealed.
    Own(&'a str),
}

/// [`Source`] of `r`'s v1 kubeconfig.
pub fn source(r: &Reservation) -> Source<'_> {
    let Some(terms) = &r.contract else {
        return Source::Nothing;
    };
    if !terms.liqo.contains(&LiqoGeneration::V1) {
        return Source::Nothing;
    }
    match &terms.v1 {
        None => Source::Provider,
        Some(ContractV1 {
            sealed_kubeconfig: Some(sealed),
            ..
        }) => Source::Own(sealed),
        Some(v1) if v1.single_consumer => Source::Provider,
        Some(_) => Source::Nothing,
    }
}

/// Where `r`'s v1 credentials stand, in words (None without v1).
pub fn state(r: &Reservation) -> Option<ContractPeering> {
    let terms = r.contract.as_ref()?;
    if !terms.liqo.contains(&LiqoGeneration::V1) {
        return None;
    }
    let ready = |reason: String, at| ContractPeering {
        state: PeeringState::CredentialsReady,
        reason,
        attached_at: at,
    };
    Some(match source(r) {
        Source::Own(_) => {
            let at = terms.v1.as_ref().and_then(|v| v.attached_at);
            ready(
                format!(
                    "provider {} attached a peering user for this contract's consumer cluster",
                    r.cluster_id
                ),
                at,
            )
        }
        Source::Provider if terms.v1.is_none() => ready(
            format!("bought before per-contract credentials: the kubeconfig provider {} registered, as then", r.cluster_id),
            None,
        ),
        Source::Provider => ready(
            format!(
                "provider {} sells to a single consumer cluster: its registered kubeconfig",
                r.cluster_id
            ),
            None,
        ),
        Source::Nothing => ContractPeering {
            state: PeeringState::AwaitingCredentials,
            reason: format!(
                "waiting for provider {} to attach a peering user for consumer cluster {}",
                r.cluster_id,
                terms.consumer_cluster_id.as_deref().unwrap_or("(not named)")
            ),
            attached_at: None,
        },
    })
}

/// The state to show when the kubeconfig `state` promised could not be
/// released (the provider dropped its registration, or a stored one no
/// longer passes the check).
pub fn not_released(cluster_id: &str) -> ContractPeering {
    ContractPeering {
        state: PeeringState::AwaitingCredentials,
        reason: format!(
            "provider {cluster_id} has no usable kubeconfig for this contract on file: it must attach one (PUT /provider/contracts/{{id}}/peering)"
        ),
        attached_at: None,
    }
}

/// Why credentials cannot be attached to a contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttachError {
    #[error("no contract {0}")]
    NotAContract(String),
    #[error("contract {id} has ended ({how}); its credentials no longer change")]
    Ended { id: String, how: &'static str },
    #[error("contract {0} was bought without Liqo v1 (the provider did not serve it then): it takes no v1 kubeconfig")]
    NoV1(String),
    #[error("contract {0} names no consumer cluster ID yet, and a peering user is made for one: wait until its consumer reports it")]
    NoConsumerCluster(String),
}

/// Whether a kubeconfig may be attached to `r` at `now`.
pub fn check_attach(r: &Reservation, now: DateTime<Utc>) -> Result<(), AttachError> {
    let Some(terms) = &r.contract else {
        return Err(AttachError::NotAContract(r.id.clone()));
    };
    if let Some(how) = r.ended_as(now) {
        return Err(AttachError::Ended {
            id: r.id.clone(),
            how,
        });
    }
    if !terms.liqo.contains(&LiqoGeneration::V1) {
        return Err(AttachError::NoV1(r.id.clone()));
    }
    if terms.consumer_cluster_id.is_none() {
        return Err(AttachError::NoConsumerCluster(r.id.clone()));
    }
    Ok(())
}

/// `r` with `sealed` attached at `now` ([`Step::Refuse`] when
/// [`check_attach`] refuses). A contract bought before per-contract
/// credentials gets its own from then on.
pub fn attach_step(r: &Reservation, sealed: &str, now: DateTime<Utc>) -> Step {
    if check_attach(r, now).is_err() {
        return Step::Refuse;
    }
    contract_change(r, |next| {
        if let Some(terms) = next.contract.as_mut() {
            let v1 = terms.v1.get_or_insert(ContractV1 {
                single_consumer: false,
                sealed_kubeconfig: None,
                attached_at: None,
            });
            v1.sealed_kubeconfig = Some(sealed.to_string());
            v1.attached_at = Some(now);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buying::model::tests::bought;

    #[test]
    fn v1_cluster_ids_are_liqos() {
        for ok in ["consumer-1", "a", "b0c1a5e2-7d1f-4c1e-9d7a-0123456789ab"] {
            check_v1_cluster_id(ok).unwrap();
        }
        check_v1_cluster_id(&"a".repeat(MAX_V1_CLUSTER_ID_LEN)).unwrap();
        // P-18: a DNS label of 49 to 63 characters is refused, since the
        // peering user's label value or tenant namespace could not exist.
        let long = format!("l{}z", "x".repeat(61));
        for bad in [
            "Consumer",
            "-a",
            "a-",
            "a.b",
            "a_b",
            "",
            &"a".repeat(64),
            &"a".repeat(MAX_V1_CLUSTER_ID_LEN + 1),
            &long,
        ] {
            assert_eq!(
                check_v1_cluster_id(bad).unwrap_err().field,
                "consumerClusterID"
            );
        }
        let v1 = [LiqoGeneration::V1];
        let e = require_cluster_id("p", &v1, None).unwrap_err();
        assert_eq!(e.field, "consumerClusterID");
        assert!(
            e.message.contains("exactly one consumer cluster"),
            "{}",
            e.message
        );
        // A v0-only provider's buyers need not name it.
        require_cluster_id("p", &[LiqoGeneration::V0], None).unwrap();
        require_cluster_id("p", &v1, Some("c-1")).unwrap();
    }

    #[test]
    fn a_contract_awaits_its_own_credentials_then_has_them() {
        let now = crate::store::now();
        let mut c = bought(now, 100);
        let terms = c.contract.as_mut().unwrap();
        terms.consumer_cluster_id = Some("c-1".into());
        terms.v1 = initial(&terms.liqo, false);
        assert_eq!(source(&c), Source::Nothing);
        let s = state(&c).unwrap();
        assert_eq!(s.state, PeeringState::AwaitingCredentials);
        assert!(s.reason.contains("c-1"), "{}", s.reason);
        let Step::Write { next, .. } = attach_step(&c, "sealed", now) else {
            panic!()
        };
        assert_eq!(source(&next), Source::Own("sealed"));
        let s = state(&next).unwrap();
        assert_eq!(
            (s.state, s.attached_at),
            (PeeringState::CredentialsReady, Some(now))
        );
        assert_eq!(next.contract.as_ref().unwrap().revision, 1);
        // The stored record never answers its sealed kubeconfig.
        let answered = serde_json::to_string(&next.clone().answered()).unwrap();
        assert!(!answered.contains("sealed"), "{answered}");
        // Ended: refused.
        let later = now + chrono::Duration::seconds(101);
        assert!(matches!(
            check_attach(&next, later),
            Err(AttachError::Ended { how: "expired", .. })
        ));
        assert_eq!(attach_step(&next, "again", later), Step::Refuse);
    }

    /// A contract record as the catalog stored it before per-contract
    /// credentials (both stores keep the record's serde form: the embedded
    /// store as JSON text, MongoDB as `body`): it reads back without its
    /// own credentials and keeps the provider's registered kubeconfig.
    #[test]
    fn a_contract_stored_before_per_contract_credentials_keeps_working() {
        let stored = r#"{"id":"k0","consumer":"alice","offerID":"o","planID":"p","clusterID":"prov","cost":"1.0","state":"purchased","channel":"rest","createdAt":"2026-11-01T10:00:00Z","expiresAt":"2999-01-01T00:00:00Z","purchasedAt":"2026-11-01T10:01:00Z","contract":{"consumerClusterID":"alice-1","clusterName":"P","resources":{"cpu":"2"},"resourceSliceClass":"liqo-broker","liqo":["v1"],"state":"ready","stateChangedAt":"2026-11-01T10:02:00Z","revision":3}}"#;
        let r: Reservation = serde_json::from_str(stored).unwrap();
        assert_eq!(source(&r), Source::Provider);
        let s = state(&r).unwrap();
        assert_eq!(s.state, PeeringState::CredentialsReady);
        // Its provider's controller may give it its own from now on.
        let now = crate::store::now();
        let Step::Write { next, .. } = attach_step(&r, "own", now) else {
            panic!()
        };
        assert_eq!(source(&next), Source::Own("own"));
        assert_eq!(next.contract.as_ref().unwrap().revision, 4);
    }

    #[test]
    fn old_and_single_consumer_contracts_get_the_providers_kubeconfig() {
        let now = crate::store::now();
        let mut legacy = bought(now, 100);
        // Bought before per-contract credentials: no `v1` in its terms.
        assert_eq!(source(&legacy), Source::Provider);
        assert!(state(&legacy)
            .unwrap()
            .reason
            .contains("before per-contract"));
        // Without a consumer cluster ID, nothing can be attached to it.
        assert!(matches!(
            check_attach(&legacy, now),
            Err(AttachError::NoConsumerCluster(_))
        ));
        legacy.contract.as_mut().unwrap().consumer_cluster_id = Some("c".into());
        let Step::Write { next, .. } = attach_step(&legacy, "own", now) else {
            panic!()
        };
        assert_eq!(source(&next), Source::Own("own"));
        let mut single = bought(now, 100);
        let terms = single.contract.as_mut().unwrap();
        terms.v1 = initial(&terms.liqo, true);
        assert_eq!(source(&single), Source::Provider);
        // No v1 at all.
        let mut v0 = bought(now, 100);
        v0.contract.as_mut().unwrap().liqo = vec![LiqoGeneration::V0];
        assert_eq!((source(&v0), state(&v0)), (Source::Nothing, None));
        assert!(matches!(check_attach(&v0, now), Err(AttachError::NoV1(_))));
    }
}
