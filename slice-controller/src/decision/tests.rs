//! Each policy, exact messages, and quantity comparisons made by value.

use super::*;

fn list(entries: &[(&str, &str)]) -> ResourceList {
    ResourceList::from_strings(entries.iter().copied()).expect("quantities")
}

fn ctx(policy: GrantPolicy, shrink: ShrinkPolicy) -> Context {
    Context {
        policy,
        shrink,
        tenant: TenantCondition::Active,
        consumer: "consumer-1".into(),
        contracted: None,
        defaults: ResourceList::new(),
    }
}

fn pending(name: &str, created: &str, asked: &[(&str, &str)]) -> Candidate {
    Candidate {
        created: created.into(),
        name: name.into(),
        requested: Ok(list(asked)),
        accepted: None,
        legacy: false,
    }
}

fn incumbent(
    name: &str,
    created: &str,
    asked: &[(&str, &str)],
    holds: &[(&str, &str)],
) -> Candidate {
    Candidate {
        accepted: Some(list(holds)),
        ..pending(name, created, asked)
    }
}

fn verdict(decision: &Decision) -> &Verdict {
    match decision {
        Decision::Set(v) => v,
        Decision::Keep => panic!("expected a verdict, got Keep"),
    }
}

/// An Accepted verdict granting `granted`, not cordoned.
fn accepted(reason: Reason, message: &str, granted: ResourceList) -> Verdict {
    Verdict {
        status: ConditionStatus::Accepted,
        reason,
        message: message.into(),
        granted: Some(granted),
        cordon: false,
    }
}

/// A revocation: Accepted, every key at `zeros`, cordoned.
fn revoked(message: &str, zeros: &[(&str, &str)]) -> Verdict {
    Verdict {
        cordon: true,
        ..accepted(Reason::ResourcesRevoked, message, list(zeros))
    }
}

/// A denial: nothing granted, not cordoned.
fn denied(reason: Reason, message: &str) -> Verdict {
    Verdict {
        status: ConditionStatus::Denied,
        reason,
        message: message.into(),
        granted: None,
        cordon: false,
    }
}

const T1: &str = "2026-11-01T00:00:00Z";
const T2: &str = "2026-11-02T00:00:00Z";
const T3: &str = "2026-11-03T00:00:00Z";

#[test]
fn fit_grants_a_request_that_fits_as_asked() {
    let offered = list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]);
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &offered,
        &[pending("a", T1, &[("cpu", "1500m"), ("memory", "8192Mi")])],
    );
    assert_eq!(
        verdict(&out[0]),
        &accepted(
            Reason::ResourcesGranted,
            "granted as requested: cpu 1500m, memory 8Gi",
            list(&[("cpu", "1500m"), ("memory", "8Gi")])
        )
    );
}

#[test]
fn fit_denies_naming_each_resource_and_the_shortfall() {
    let offered = list(&[("cpu", "6"), ("memory", "6Gi")]);
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &offered,
        &[
            incumbent("old", T1, &[("cpu", "3500m")], &[("cpu", "3500m")]),
            pending(
                "new",
                T2,
                &[
                    ("cpu", "4"),
                    ("memory", "8Gi"),
                    ("nvidia.com/gpu", "1"),
                    ("pods", "0"),
                ],
            ),
        ],
    );
    assert_eq!(out[0], Decision::Keep);
    assert_eq!(
        verdict(&out[1]),
        &denied(
            Reason::InsufficientResources,
            "does not fit: \
                cpu: requested 4, remaining 2500m (offered 6, held by other accepted slices 3500m), short by 1500m; \
                memory: requested 8Gi, remaining 6Gi (offered 6Gi, held by other accepted slices 0), short by 2Gi; \
                nvidia.com/gpu: requested 1, remaining 0 (offered 0, held by other accepted slices 0), short by 1"
        )
    );
}

#[test]
fn fit_compares_quantities_by_value() {
    let c = ctx(GrantPolicy::Fit, ShrinkPolicy::Keep);
    // 1Gi == 1024Mi: fits exactly.
    let out = decide_all(
        &c,
        &list(&[("memory", "1024Mi")]),
        &[pending("a", T1, &[("memory", "1Gi")])],
    );
    assert_eq!(verdict(&out[0]).status, ConditionStatus::Accepted);
    // 1G < 1Gi: short by the difference, exactly.
    let out = decide_all(
        &c,
        &list(&[("memory", "1G")]),
        &[pending("a", T1, &[("memory", "1Gi")])],
    );
    assert_eq!(
        verdict(&out[0]).message,
        "does not fit: memory: requested 1Gi, remaining 1G (offered 1G, held by other accepted slices 0), short by 73741824"
    );
    // 1500m of cpu against 1.5: equal.
    let out = decide_all(
        &c,
        &list(&[("cpu", "1.5")]),
        &[pending("a", T1, &[("cpu", "1500m")])],
    );
    assert_eq!(verdict(&out[0]).status, ConditionStatus::Accepted);
}

#[test]
fn fit_decides_the_oldest_first_and_incumbents_before_newcomers() {
    let offered = list(&[("cpu", "4")]);
    let c = ctx(GrantPolicy::Fit, ShrinkPolicy::Keep);
    // Two newcomers of 3 cpu: the older wins, whatever the input order.
    let out = decide_all(
        &c,
        &offered,
        &[
            pending("b", T2, &[("cpu", "3")]),
            pending("a", T1, &[("cpu", "3")]),
        ],
    );
    assert_eq!(verdict(&out[1]).status, ConditionStatus::Accepted);
    assert_eq!(verdict(&out[0]).status, ConditionStatus::Denied);
    assert_eq!(verdict(&out[0]).message, "does not fit: cpu: requested 3, remaining 1 (offered 4, held by other accepted slices 3), short by 2");
    // An incumbent younger than a newcomer still goes first.
    let out = decide_all(
        &c,
        &offered,
        &[
            pending("old", T1, &[("cpu", "3")]),
            incumbent("young", T3, &[("cpu", "3")], &[("cpu", "3")]),
        ],
    );
    assert_eq!(out[1], Decision::Keep);
    assert_eq!(verdict(&out[0]).status, ConditionStatus::Denied);
}

#[test]
fn fit_keep_never_takes_a_grant_back_follow_does() {
    // The allowance shrank from 4 to 2 cpu; "a" holds 3.
    let offered = list(&[("cpu", "2")]);
    let slices = [
        incumbent("a", T1, &[("cpu", "3")], &[("cpu", "3")]),
        pending("b", T2, &[("cpu", "1")]),
    ];
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &offered,
        &slices,
    );
    assert_eq!(out[0], Decision::Keep);
    assert_eq!(
        verdict(&out[1]).message,
        "does not fit: cpu: requested 1, remaining 0 (offered 2, held by other accepted slices 3), short by 1"
    );

    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Follow),
        &offered,
        &slices,
    );
    // Revoked, not denied: Liqo ignores a denial after acceptance.
    assert_eq!(
        verdict(&out[0]),
        &revoked(
            "revoked: every resource is 0 and the slice is cordoned (does not fit: cpu: requested 3, remaining 2 (offered 2, held by other accepted slices 0), short by 1)",
            &[("cpu", "0")]
        )
    );
    // With "a" revoked, "b" fits.
    assert_eq!(verdict(&out[1]).status, ConditionStatus::Accepted);
}

#[test]
fn fit_a_changed_request_is_decided_afresh() {
    let offered = list(&[("cpu", "4")]);
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &offered,
        &[incumbent("a", T1, &[("cpu", "6")], &[("cpu", "2")])],
    );
    // The new request does not fit; under keep the grant held stands.
    assert_eq!(
        verdict(&out[0]),
        &accepted(
            Reason::InsufficientResources,
            "does not fit: cpu: requested 6, remaining 4 (offered 4, held by other accepted slices 0), short by 2; the grant it holds stands",
            list(&[("cpu", "2")])
        )
    );
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &offered,
        &[incumbent("a", T1, &[("cpu", "3")], &[("cpu", "2")])],
    );
    assert_eq!(verdict(&out[0]).granted, Some(list(&[("cpu", "3")])));
}

#[test]
fn clamp_grants_the_smaller_of_request_and_remainder() {
    let offered = list(&[("cpu", "4"), ("memory", "8Gi")]);
    let out = decide_all(
        &ctx(GrantPolicy::Clamp, ShrinkPolicy::Keep),
        &offered,
        &[
            incumbent("a", T1, &[("cpu", "1")], &[("cpu", "1")]),
            pending(
                "b",
                T2,
                &[("cpu", "5"), ("memory", "2Gi"), ("nvidia.com/gpu", "1")],
            ),
        ],
    );
    assert_eq!(
        verdict(&out[1]),
        &accepted(
            Reason::ResourcesClamped,
            "granted less than requested: cpu 3 (requested 5, remaining 3), memory 2Gi, nvidia.com/gpu 0 (requested 1, remaining 0)",
            list(&[("cpu", "3"), ("memory", "2Gi"), ("nvidia.com/gpu", "0")])
        )
    );
    // A request within what remains is granted as asked.
    let out = decide_all(
        &ctx(GrantPolicy::Clamp, ShrinkPolicy::Keep),
        &offered,
        &[pending("c", T1, &[("cpu", "2")])],
    );
    assert_eq!(
        verdict(&out[0]),
        &accepted(
            Reason::ResourcesGranted,
            "granted as requested: cpu 2",
            list(&[("cpu", "2")])
        )
    );
}

#[test]
fn clamp_keep_grows_but_never_shrinks_follow_shrinks() {
    let holds = incumbent("a", T1, &[("cpu", "4")], &[("cpu", "2")]);
    // Grows to 3 when 3 remain.
    let out = decide_all(
        &ctx(GrantPolicy::Clamp, ShrinkPolicy::Keep),
        &list(&[("cpu", "3")]),
        std::slice::from_ref(&holds),
    );
    assert_eq!(verdict(&out[0]).granted, Some(list(&[("cpu", "3")])));
    // Keeps 2 when only 1 remains.
    let out = decide_all(
        &ctx(GrantPolicy::Clamp, ShrinkPolicy::Keep),
        &list(&[("cpu", "1")]),
        std::slice::from_ref(&holds),
    );
    assert_eq!(verdict(&out[0]).granted, Some(list(&[("cpu", "2")])));
    assert_eq!(
        verdict(&out[0]).message,
        "granted less than requested: cpu 2 (requested 4, remaining 1)"
    );
    // Follow: shrinks to 1.
    let out = decide_all(
        &ctx(GrantPolicy::Clamp, ShrinkPolicy::Follow),
        &list(&[("cpu", "1")]),
        &[holds],
    );
    assert_eq!(verdict(&out[0]).granted, Some(list(&[("cpu", "1")])));
    // A request lowered below the grant is decided afresh, even with keep.
    let lowered = incumbent("a", T1, &[("cpu", "1")], &[("cpu", "2")]);
    let out = decide_all(
        &ctx(GrantPolicy::Clamp, ShrinkPolicy::Keep),
        &list(&[("cpu", "8")]),
        &[lowered],
    );
    assert_eq!(verdict(&out[0]).granted, Some(list(&[("cpu", "1")])));
}

#[test]
fn offer_grants_what_remains_whatever_was_asked() {
    let offered = list(&[("cpu", "4"), ("memory", "8Gi")]);
    let out = decide_all(
        &ctx(GrantPolicy::Offer, ShrinkPolicy::Keep),
        &offered,
        &[pending("a", T1, &[("cpu", "1")])],
    );
    assert_eq!(
        verdict(&out[0]),
        &accepted(
            Reason::ResourcesOffered,
            "granted what is offered: cpu 4, memory 8Gi",
            offered.clone()
        )
    );
    // A second slice of the same consumer gets what the first left: nothing.
    let out = decide_all(
        &ctx(GrantPolicy::Offer, ShrinkPolicy::Keep),
        &offered,
        &[
            incumbent("a", T1, &[], &[("cpu", "4"), ("memory", "8Gi")]),
            pending("b", T2, &[]),
        ],
    );
    assert_eq!(
        verdict(&out[1]).message,
        "granted what is offered: cpu 0, memory 0"
    );
}

#[test]
fn offer_follows_the_chain_down_only_with_follow() {
    let holds = incumbent("a", T1, &[], &[("cpu", "4")]);
    let shrunk = list(&[("cpu", "2"), ("memory", "1Gi")]);
    let out = decide_all(
        &ctx(GrantPolicy::Offer, ShrinkPolicy::Keep),
        &shrunk,
        std::slice::from_ref(&holds),
    );
    assert_eq!(
        verdict(&out[0]).granted,
        Some(list(&[("cpu", "4"), ("memory", "1Gi")]))
    );
    let out = decide_all(
        &ctx(GrantPolicy::Offer, ShrinkPolicy::Follow),
        &shrunk,
        &[holds],
    );
    assert_eq!(verdict(&out[0]).granted, Some(shrunk));
}

#[test]
fn cordoned_tenant_keeps_grants_and_denies_new_ones() {
    let c = Context {
        tenant: TenantCondition::Cordoned,
        ..ctx(GrantPolicy::Clamp, ShrinkPolicy::Follow)
    };
    let out = decide_all(
        &c,
        &list(&[("cpu", "100")]),
        &[
            incumbent("a", T1, &[("cpu", "1")], &[("cpu", "1")]),
            pending("b", T2, &[("cpu", "1")]),
        ],
    );
    assert_eq!(out[0], Decision::Keep);
    assert_eq!(
        verdict(&out[1]),
        &denied(
            Reason::TenantCordoned,
            "tenant consumer-1 is cordoned: no new resources are granted"
        )
    );
}

#[test]
fn drained_tenant_gets_nothing() {
    let c = Context {
        tenant: TenantCondition::Drained,
        ..ctx(GrantPolicy::Fit, ShrinkPolicy::Keep)
    };
    let out = decide_all(
        &c,
        &list(&[("cpu", "100")]),
        &[
            incumbent("a", T1, &[("cpu", "1")], &[("cpu", "1")]),
            pending("b", T2, &[("cpu", "1")]),
        ],
    );
    // What it held is revoked; what it never held is denied.
    assert_eq!(
        verdict(&out[0]),
        &revoked(
            "revoked: every resource is 0 and the slice is cordoned (tenant consumer-1 is drained: no resources are granted)",
            &[("cpu", "0")]
        )
    );
    assert_eq!(
        verdict(&out[1]),
        &denied(
            Reason::TenantDrained,
            "tenant consumer-1 is drained: no resources are granted"
        )
    );
}

#[test]
fn unreadable_request_is_denied_with_the_reason() {
    let bad = Candidate {
        requested: Err(ModelError::BadQuantity {
            name: "cpu".into(),
            value: "lots".into(),
            reason: "no digits".into(),
        }),
        ..pending("a", T1, &[])
    };
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &list(&[]),
        &[bad],
    );
    let v = verdict(&out[0]);
    assert_eq!(v.reason, Reason::InvalidRequest);
    assert_eq!(
        v.message,
        "spec.resources.cpu: \"lots\" is not a quantity: no digits"
    );
}

#[test]
fn an_empty_request_fits_anything() {
    let out = decide_all(
        &ctx(GrantPolicy::Fit, ShrinkPolicy::Keep),
        &list(&[]),
        &[pending("a", T1, &[])],
    );
    assert_eq!(verdict(&out[0]).message, "granted as requested: nothing");
    assert_eq!(verdict(&out[0]).granted, Some(list(&[])));
}

fn contracts(shrink: ShrinkPolicy, bought: Option<&[(&str, &str)]>) -> Context {
    Context {
        contracted: bought.map(list),
        ..ctx(GrantPolicy::Contracts, shrink)
    }
}

#[test]
fn contracts_allow_the_smaller_of_contract_and_chain_per_resource() {
    let allowance = contract_allowance(
        &list(&[("cpu", "8"), ("memory", "2Gi"), ("pods", "110")]),
        &list(&[("cpu", "2"), ("memory", "4Gi"), ("nvidia.com/gpu", "1")]),
    );
    assert_eq!(
        allowance,
        list(&[("cpu", "2"), ("memory", "2Gi"), ("nvidia.com/gpu", "0")])
    );
}

#[test]
fn contracts_clamp_an_over_asking_slice_and_grant_nothing_outside_them() {
    let out = decide_all(
        &contracts(ShrinkPolicy::Keep, Some(&[("cpu", "2"), ("memory", "4Gi")])),
        &list(&[("cpu", "8"), ("memory", "16Gi"), ("pods", "110")]),
        &[
            pending("a", T1, &[("cpu", "1"), ("memory", "4Gi")]),
            pending("b", T2, &[("cpu", "2"), ("pods", "10")]),
        ],
    );
    assert_eq!(
        verdict(&out[0]),
        &accepted(
            Reason::ResourcesGranted,
            "granted as requested: cpu 1, memory 4Gi",
            list(&[("cpu", "1"), ("memory", "4Gi")])
        )
    );
    assert_eq!(
        verdict(&out[1]),
        &accepted(
            Reason::ResourcesClamped,
            "granted less than requested: cpu 1 (requested 2, remaining 1), pods 0 (requested 10, remaining 0)",
            list(&[("cpu", "1"), ("pods", "0")])
        )
    );
}

#[test]
fn contracts_a_second_contract_adds_to_the_grant() {
    let holding = incumbent("a", T1, &[("cpu", "4")], &[("cpu", "2")]);
    let out = decide_all(
        &contracts(ShrinkPolicy::Keep, Some(&[("cpu", "4")])),
        &list(&[("cpu", "100")]),
        &[holding],
    );
    assert_eq!(verdict(&out[0]).granted, Some(list(&[("cpu", "4")])));
}

#[test]
fn contracts_without_one_nothing_new_and_follow_takes_grants_back() {
    let holding = incumbent("a", T1, &[("cpu", "2")], &[("cpu", "2")]);
    let newcomer = pending("b", T2, &[("cpu", "1")]);
    let offered = list(&[("cpu", "100")]);
    let kept = decide_all(
        &contracts(ShrinkPolicy::Keep, None),
        &offered,
        &[holding.clone(), newcomer.clone()],
    );
    assert_eq!(kept[0], Decision::Keep, "keep: the grant stands");
    assert_eq!(
        verdict(&kept[1]),
        &denied(
            Reason::NoActiveContract,
            "consumer consumer-1 has no active contract with this provider: nothing is granted"
        )
    );
    let followed = decide_all(
        &contracts(ShrinkPolicy::Follow, None),
        &offered,
        &[holding.clone(), newcomer],
    );
    // follow: the grant is revoked, not denied (Liqo ignores a denial
    // after acceptance).
    assert_eq!(
        verdict(&followed[0]),
        &revoked(
            "revoked: every resource is 0 and the slice is cordoned (consumer consumer-1 has no active contract with this provider: nothing is granted)",
            &[("cpu", "0")]
        )
    );
    // A contract that shrinks (one of two expired): follow shrinks the grant.
    let shrunk = decide_all(
        &contracts(ShrinkPolicy::Follow, Some(&[("cpu", "1")])),
        &offered,
        &[incumbent("a", T1, &[("cpu", "2")], &[("cpu", "2")])],
    );
    assert_eq!(verdict(&shrunk[0]).granted, Some(list(&[("cpu", "1")])));
    let stays = decide_all(
        &contracts(ShrinkPolicy::Keep, Some(&[("cpu", "1")])),
        &offered,
        &[incumbent("a", T1, &[("cpu", "2")], &[("cpu", "2")])],
    );
    assert_eq!(verdict(&stays[0]).granted, Some(list(&[("cpu", "2")])));
}

fn with_defaults(c: Context) -> Context {
    Context {
        defaults: list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "110")]),
        ..c
    }
}

#[test]
fn a_grant_always_carries_the_default_keys_capped_by_request_and_chain() {
    // A GPU-only plan: the contract sells no cpu, memory or pods.
    let c = with_defaults(contracts(
        ShrinkPolicy::Follow,
        Some(&[("nvidia.com/gpu", "1")]),
    ));
    let offered = list(&[("cpu", "8"), ("memory", "2Gi"), ("nvidia.com/gpu", "2")]);
    let out = decide_all(
        &c,
        &offered,
        &[
            pending("gpu", T1, &[("nvidia.com/gpu", "1")]),
            // Asks pods no contract sells: not clamped to 0, given the
            // default up to what it asked.
            pending("pods", T2, &[("pods", "10")]),
        ],
    );
    assert_eq!(
        verdict(&out[0]),
        &accepted(
            Reason::ResourcesGranted,
            "granted as requested: nvidia.com/gpu 1; with the class's defaults for a usable node: cpu 4, memory 2Gi, pods 110",
            list(&[("cpu", "4"), ("memory", "2Gi"), ("nvidia.com/gpu", "1"), ("pods", "110")])
        )
    );
    // Defaults are per slice, never taken from the allowance.
    assert_eq!(
        verdict(&out[1]).granted,
        Some(list(&[("cpu", "4"), ("memory", "2Gi"), ("pods", "10")]))
    );
    // Sold keys are the contracts' business: a contract selling cpu 1
    // gives cpu 1, not the default.
    let c = with_defaults(contracts(ShrinkPolicy::Follow, Some(&[("cpu", "1")])));
    let out = decide_all(&c, &offered, &[pending("a", T1, &[("cpu", "3")])]);
    assert_eq!(
        verdict(&out[0]).granted,
        Some(list(&[("cpu", "1"), ("memory", "2Gi"), ("pods", "110")]))
    );
    // A sold key not asked for gets the default within what is sold.
    let c = with_defaults(contracts(
        ShrinkPolicy::Follow,
        Some(&[("cpu", "2"), ("memory", "1Gi")]),
    ));
    let out = decide_all(&c, &offered, &[pending("a", T1, &[("cpu", "1")])]);
    assert_eq!(
        verdict(&out[0]).granted,
        Some(list(&[("cpu", "1"), ("memory", "1Gi"), ("pods", "110")]))
    );
}

#[test]
fn a_shrink_keeps_accepted_and_every_key_held() {
    let c = with_defaults(contracts(
        ShrinkPolicy::Follow,
        Some(&[("cpu", "1"), ("memory", "1Gi")]),
    ));
    let out = decide_all(
        &c,
        &list(&[("cpu", "8"), ("memory", "8Gi"), ("pods", "110")]),
        &[incumbent(
            "a",
            T1,
            &[("cpu", "2"), ("memory", "2Gi")],
            &[
                ("cpu", "2"),
                ("memory", "2Gi"),
                ("pods", "110"),
                ("nvidia.com/gpu", "1"),
            ],
        )],
    );
    let v = verdict(&out[0]);
    assert_eq!(v.status, ConditionStatus::Accepted);
    assert!(!v.cordon);
    assert_eq!(
        v.granted,
        Some(list(&[
            ("cpu", "1"),
            ("memory", "1Gi"),
            ("pods", "110"),
            ("nvidia.com/gpu", "0")
        ]))
    );
}

#[test]
fn the_end_of_the_last_contract_zeroes_every_key_and_cordons_a_new_one_lifts_it() {
    let held = incumbent(
        "a",
        T1,
        &[("cpu", "2"), ("memory", "4Gi")],
        &[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")],
    );
    let offered = list(&[("cpu", "8"), ("memory", "8Gi"), ("pods", "110")]);
    let out = decide_all(
        &with_defaults(contracts(ShrinkPolicy::Follow, None)),
        &offered,
        std::slice::from_ref(&held),
    );
    let revoked = verdict(&out[0]);
    assert_eq!(
        (revoked.status, revoked.reason, revoked.cordon),
        (ConditionStatus::Accepted, Reason::ResourcesRevoked, true)
    );
    assert_eq!(
        revoked.granted,
        Some(list(&[("cpu", "0"), ("memory", "0"), ("pods", "0")]))
    );
    // Revoked again: nothing changes (the same verdict).
    let again = Candidate {
        accepted: revoked.granted.clone(),
        ..held.clone()
    };
    let out = decide_all(
        &with_defaults(contracts(ShrinkPolicy::Follow, None)),
        &offered,
        std::slice::from_ref(&again),
    );
    assert_eq!(verdict(&out[0]), revoked);
    // A new contract: granted again, the cordon lifted.
    let out = decide_all(
        &with_defaults(contracts(
            ShrinkPolicy::Follow,
            Some(&[("cpu", "2"), ("memory", "4Gi")]),
        )),
        &offered,
        &[again],
    );
    let back = verdict(&out[0]);
    assert_eq!(back.status, ConditionStatus::Accepted);
    assert!(!back.cordon);
    assert_eq!(
        back.granted,
        Some(list(&[("cpu", "2"), ("memory", "4Gi"), ("pods", "110")]))
    );
}

#[test]
fn a_slice_the_previous_release_left_denied_without_contract_is_revoked() {
    assert_eq!(
        held_grant(Some(ConditionStatus::Denied), LEGACY_NO_CONTRACT, None),
        Some(list(&[]))
    );
    assert!(is_legacy_denial(
        Some(ConditionStatus::Denied),
        "NoContract"
    ));
    assert!(!is_legacy_denial(
        Some(ConditionStatus::Denied),
        "NoActiveContract"
    ));
    assert_eq!(
        held_grant(Some(ConditionStatus::Denied), "InsufficientResources", None),
        None
    );
    assert_eq!(
        held_grant(
            Some(ConditionStatus::Accepted),
            "x",
            Some(list(&[("cpu", "1")]))
        ),
        Some(list(&[("cpu", "1")]))
    );
    let legacy = Candidate {
        accepted: Some(list(&[])),
        legacy: true,
        ..pending("a", T1, &[("cpu", "2"), ("nvidia.com/gpu", "1")])
    };
    // Under keep too: the old release's denial left Liqo's grant in force.
    for shrink in [ShrinkPolicy::Keep, ShrinkPolicy::Follow] {
        let out = decide_all(
            &with_defaults(contracts(shrink, None)),
            &list(&[("cpu", "8")]),
            std::slice::from_ref(&legacy),
        );
        let v = verdict(&out[0]);
        assert_eq!(
            (v.reason, v.cordon),
            (Reason::ResourcesRevoked, true),
            "{shrink:?}"
        );
        assert_eq!(
            v.granted,
            Some(list(&[
                ("cpu", "0"),
                ("memory", "0"),
                ("nvidia.com/gpu", "0"),
                ("pods", "0")
            ]))
        );
    }
    // A slice never granted and without a contract is denied, with a
    // reason the previous release never wrote.
    let out = decide_all(
        &with_defaults(contracts(ShrinkPolicy::Follow, None)),
        &list(&[("cpu", "8")]),
        &[pending("b", T1, &[("cpu", "1")])],
    );
    assert_eq!(verdict(&out[0]).reason.as_str(), "NoActiveContract");
    assert_eq!(verdict(&out[0]).status, ConditionStatus::Denied);
}

mod contracts_properties {
    use super::*;
    use proptest::prelude::*;

    fn amounts() -> impl Strategy<Value = Vec<(u8, u8)>> {
        // (cpu, memory in Gi) pairs; 0 leaves the resource out.
        proptest::collection::vec((0u8..6, 0u8..6), 0..5)
    }

    fn to_list(cpu: u8, mem: u8) -> ResourceList {
        let mut l = ResourceList::new();
        if cpu > 0 {
            l.insert("cpu", cpu.to_string().parse().expect("q"));
        }
        if mem > 0 {
            l.insert("memory", format!("{mem}Gi").parse().expect("q"));
        }
        l
    }

    proptest! {
        /// Under `contracts` with `follow`, whatever the slices ask and hold,
        /// the consumer's accepted grants together never exceed, resource
        /// by resource, its contracts nor the chain; no slice gets more
        /// than it asked; and resources outside the contracts get nothing.
        #[test]
        fn grants_stay_within_contracts_and_chain(
            bought in (0u8..6, 0u8..6),
            chain in (0u8..8, 0u8..8),
            asks in amounts(),
            holds in amounts(),
        ) {
            let contracted = to_list(bought.0, bought.1);
            let offered = to_list(chain.0, chain.1);
            let candidates: Vec<Candidate> = asks.iter().enumerate().map(|(i, a)| {
                let mut asked = to_list(a.0, a.1);
                asked.insert("pods", "3".parse().expect("q"));
                Candidate {
                    created: format!("2026-11-0{}T00:00:00Z", i + 1),
                    name: format!("s{i}"),
                    requested: Ok(asked),
                    accepted: holds.get(i).map(|h| to_list(h.0, h.1)),
                    legacy: false,
                }
            }).collect();
            let c = contracts(ShrinkPolicy::Follow, Some(&[]));
            let c = Context { contracted: Some(contracted.clone()), ..c };
            let out = decide_all(&c, &offered, &candidates);
            let allowance = contract_allowance(&offered, &contracted);
            let mut total = ResourceList::new();
            for (d, cand) in out.iter().zip(&candidates) {
                let granted = match d {
                    Decision::Keep => cand.accepted.clone(),
                    Decision::Set(v) => v.granted.clone(),
                };
                if let Some(g) = granted {
                    let asked = cand.requested.as_ref().expect("asked");
                    // Keys held before and no longer asked for stay at 0.
                    let asked_part: ResourceList = g.0.iter()
                        .filter(|(name, q)| asked.get(name).is_some() || !q.is_zero())
                        .map(|(n, q)| (n.clone(), q.clone())).collect();
                    prop_assert!(within(&asked_part, asked), "granted {g:?} for {asked:?}");
                    prop_assert!(g.get("pods").is_none_or(Quantity::is_zero), "pods: {g:?}");
                    total = total.add(&g);
                }
            }
            for (name, q) in &total.0 {
                let allowed = allowance.get(name).cloned().unwrap_or_else(zero);
                prop_assert!(*q <= allowed, "{name}: {q} > {allowed}");
            }
        }
    }
}
