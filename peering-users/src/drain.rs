//! Draining a consumer's Tenant before it is deleted (`--drain-tenant`),
//! decided here (pure); the cluster module does the calls.
//!
//! Liqo v1.2.0 has no status saying a drain is over: on
//! `spec.tenantCondition: Drained` (`apis/authentication/v1beta1/tenant_types.go`)
//! its Tenant controller unbinds the consumer's roles and deletes every
//! ResourceSlice and NamespaceMap replicated from the consumer
//! (`pkg/liqo-controller-manager/authentication/tenant-controller/tenant_controller.go`,
//! `handleTenantDrained`, selecting them with
//! `pkg/utils/labels.RemoteLabelSelectorForCluster`: `liqo.io/replicated=true`
//! and `liqo.io/originID=<consumer>`); with them go its virtual node's
//! grant and its offloaded namespaces. So the drain is waited for as those
//! objects' absence, for at most `--drain-grace`.

use std::time::Duration;

use controller_core::liqo::{self, LiqoKind, OFFLOADING_GROUP, V1BETA1};

use crate::names::ConsumerId;

/// `apis/offloading/v1beta1/namespacemap_types.go`.
pub const NAMESPACE_MAP: LiqoKind = LiqoKind {
    group: OFFLOADING_GROUP,
    version: V1BETA1,
    kind: "NamespaceMap",
    plural: "namespacemaps",
};

/// The kinds whose replicas from the consumer a drain removes.
pub const DRAINED_KINDS: [LiqoKind; 2] = [liqo::RESOURCE_SLICE, NAMESPACE_MAP];

/// `RemoteLabelSelectorForCluster(consumer)`.
pub fn replicated_from(consumer: &ConsumerId) -> String {
    format!(
        "{}=true,{}={}",
        liqo::REPLICATED_LABEL,
        liqo::ORIGIN_ID_LABEL,
        consumer.as_str()
    )
}

/// The next step of a drain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Set these Tenants `Drained` (the wait starts).
    Mark(Vec<String>),
    /// Liqo has not removed the consumer's replicas yet.
    Wait,
    /// Delete the Tenants: drained, or `--drain-grace` ran out first
    /// (`timed_out`: said in the log, as the consumer may still hold
    /// something here).
    Delete { timed_out: bool },
}

/// What to do with a consumer's `tenants` (name, already `Drained`) when
/// `left` of its replicas remain and the drain started `waited` ago.
pub fn step(tenants: &[(String, bool)], left: usize, waited: Duration, grace: Duration) -> Step {
    let undrained: Vec<String> = tenants
        .iter()
        .filter(|(_, drained)| !drained)
        .map(|(name, _)| name.clone())
        .collect();
    if !undrained.is_empty() {
        return Step::Mark(undrained);
    }
    if left == 0 {
        return Step::Delete { timed_out: false };
    }
    if waited < grace {
        Step::Wait
    } else {
        Step::Delete { timed_out: true }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(120);

    fn t(name: &str, drained: bool) -> (String, bool) {
        (name.to_string(), drained)
    }

    #[test]
    fn marked_then_waited_for_then_deleted() {
        let zero = Duration::ZERO;
        assert_eq!(
            step(&[t("a", false), t("b", true)], 2, zero, GRACE),
            Step::Mark(vec!["a".to_string()])
        );
        assert_eq!(step(&[t("a", true)], 2, zero, GRACE), Step::Wait);
        assert_eq!(
            step(&[t("a", true)], 0, zero, GRACE),
            Step::Delete { timed_out: false }
        );
        assert_eq!(
            step(&[t("a", true)], 1, GRACE, GRACE),
            Step::Delete { timed_out: true }
        );
    }

    #[test]
    fn the_selector_is_liqos() {
        let c = ConsumerId::parse("c1").unwrap();
        assert_eq!(
            replicated_from(&c),
            "liqo.io/replicated=true,liqo.io/originID=c1"
        );
    }
}
