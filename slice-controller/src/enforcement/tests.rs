//! Reading Liqo's flags as pflag does, the level shown, and what is held
//! back for each setting and flag.

use super::*;

fn words(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_string).collect()
}

fn list(entries: &[(&str, &str)]) -> ResourceList {
    ResourceList::from_strings(entries.iter().copied()).expect("quantities")
}

fn observed(enforcement: Result<bool, &str>, limits: Result<LimitsLevel, &str>) -> Observed {
    Observed {
        resource_enforcement: enforcement.map_err(str::to_string),
        limits: limits.map_err(str::to_string),
    }
}

#[test]
fn the_webhook_flag_is_read_as_pflag_reads_a_bool() {
    // As the chart renders it when enableResourceEnforcement is true
    // (liqo-webhook-deployment.yaml:66-68), and when it is false.
    let chart_on = words("/usr/bin/webhook --webhook-port=9443 --cluster-id=$(CLUSTER_ID) --enable-resource-enforcement");
    assert_eq!(resource_enforcement(&chart_on), Ok(true));
    let chart_off = words("/usr/bin/webhook --webhook-port=9443 --cluster-id=$(CLUSTER_ID)");
    assert_eq!(resource_enforcement(&chart_off), Ok(false));
    // extraArgs come later: the last value wins.
    let overridden = words("--enable-resource-enforcement --enable-resource-enforcement=false");
    assert_eq!(resource_enforcement(&overridden), Ok(false));
    assert_eq!(
        resource_enforcement(&words("--enable-resource-enforcement=T")),
        Ok(true)
    );
    // A longer flag with the same start is another flag.
    assert_eq!(
        resource_enforcement(&words("--enable-resource-enforcement-extra=true")),
        Ok(false)
    );
    assert_eq!(
        resource_enforcement(&words("--enable-resource-enforcement=yes")),
        Err("--enable-resource-enforcement=\"yes\" is not a bool".to_string())
    );
}

#[test]
fn the_limits_level_is_one_of_liqos_exact_values() {
    assert_eq!(
        limits_level(&words("--default-limits-enforcement=Hard")),
        Ok(LimitsLevel::Hard)
    );
    assert_eq!(
        limits_level(&words("--default-limits-enforcement Soft")),
        Ok(LimitsLevel::Soft)
    );
    assert_eq!(
        limits_level(&words(
            "--offloading-enabled=true --default-limits-enforcement=None"
        )),
        Ok(LimitsLevel::None)
    );
    // Absent: the flag's default `none`, which Liqo never compares equal to
    // None, Soft or Hard.
    assert_eq!(
        limits_level(&words("--cluster-id=x")),
        Err(
            "--default-limits-enforcement=\"none\" is none of Liqo's levels None, Soft, Hard"
                .to_string()
        )
    );
    assert!(limits_level(&words("--default-limits-enforcement=hard")).is_err());
}

#[test]
fn the_level_shown() {
    let none = Ok(LimitsLevel::None);
    assert_eq!(observed(Ok(false), none).level(), Level::Off);
    assert_eq!(observed(Ok(false), Err("x")).level(), Level::Off);
    assert_eq!(
        observed(Ok(true), Ok(LimitsLevel::Hard)).level().label(),
        "hard"
    );
    assert_eq!(observed(Ok(true), none).level().label(), "none");
    assert_eq!(
        observed(Err("forbidden"), Ok(LimitsLevel::Hard)).level(),
        Level::Unknown
    );
    assert_eq!(observed(Ok(true), Err("missing")).level(), Level::Unknown);
    assert_eq!(Observed::unread().level().label(), "unknown");
    for level in [Level::Off, Level::On(LimitsLevel::Soft), Level::Unknown] {
        assert!(crate::metrics::ENFORCEMENT_LEVELS.contains(&level.label()));
    }
    assert_eq!(
        observed(Ok(true), Err("Deployment liqo/liqo-controller-manager not found")).describe(),
        "Liqo resource enforcement on, defaultLimitsEnforcement unknown (Deployment liqo/liqo-controller-manager not found)"
    );
}

#[test]
fn what_is_held_back_for_each_setting_and_flag() {
    use SoldAsEnforced as S;
    use UnknownPolicy::{Grant, Refuse};
    let off = observed(Ok(false), Ok(LimitsLevel::Hard));
    let stock = observed(Ok(true), Ok(LimitsLevel::None));
    let hard = observed(Ok(true), Ok(LimitsLevel::Hard));
    let forbidden = observed(
        Err("reading Deployment liqo/liqo-webhook is forbidden"),
        Ok(LimitsLevel::Hard),
    );
    let no_level = observed(
        Ok(true),
        Err("Deployment liqo/liqo-controller-manager not found"),
    );
    let reason = |o: &Observed, s, u| hold(o, s, u).map(|h| h.reason);

    // Off refuses whatever the unknown policy, unless nothing is sold as
    // enforced.
    for unknown in [Grant, Refuse] {
        assert_eq!(reason(&off, S::On, unknown), Some(Reason::EnforcementOff));
        assert_eq!(reason(&off, S::No, unknown), None);
        assert_eq!(reason(&stock, S::On, unknown), None);
        assert_eq!(reason(&hard, S::Hard, unknown), None);
    }
    assert_eq!(reason(&stock, S::Soft, Grant), Some(Reason::EnforcementOff));
    assert_eq!(
        reason(&stock, S::Hard, Refuse),
        Some(Reason::EnforcementOff)
    );
    assert_eq!(reason(&hard, S::Soft, Refuse), None);
    // Unknown follows the flag.
    assert_eq!(reason(&forbidden, S::On, Grant), None);
    assert_eq!(
        reason(&forbidden, S::On, Refuse),
        Some(Reason::EnforcementUnknown)
    );
    assert_eq!(reason(&forbidden, S::No, Refuse), None);
    // The level matters only when sold above `on`.
    assert_eq!(reason(&no_level, S::On, Refuse), None);
    assert_eq!(
        reason(&no_level, S::Hard, Refuse),
        Some(Reason::EnforcementUnknown)
    );
    assert_eq!(reason(&no_level, S::Hard, Grant), None);

    assert_eq!(
        hold(&off, S::On, Grant).map(|h| h.message),
        Some("Liqo's resource enforcement is off on this provider (its webhook runs without --enable-resource-enforcement; Helm controllerManager.config.enableResourceEnforcement): capacity sold as enforced is not granted".to_string())
    );
    assert_eq!(
        hold(&stock, S::Hard, Grant).map(|h| h.message),
        Some("Liqo's defaultLimitsEnforcement is None on this provider, below the Hard this capacity is sold with: not granted".to_string())
    );
    assert_eq!(
        hold(&forbidden, S::On, Refuse).map(|h| h.message),
        Some("Liqo's resource enforcement on this provider cannot be read (reading Deployment liqo/liqo-webhook is forbidden): capacity sold as enforced is not granted until it is".to_string())
    );
}

fn slice(name: &str, holds: Option<&[(&str, &str)]>) -> Candidate {
    Candidate {
        created: "2026-11-20T08:00:00Z".into(),
        name: name.into(),
        requested: Ok(list(&[("cpu", "2")])),
        accepted: holds.map(list),
        legacy: false,
    }
}

fn grant(reason: Reason, entries: &[(&str, &str)]) -> Decision {
    Decision::Set(Verdict {
        status: ConditionStatus::Accepted,
        reason,
        message: "m".into(),
        granted: Some(list(entries)),
        cordon: reason == Reason::ResourcesRevoked,
    })
}

#[test]
fn a_hold_grants_nothing_new_and_never_grows_a_grant() {
    let hold = Hold {
        reason: Reason::EnforcementOff,
        message: "off".into(),
    };
    let candidates = [
        slice("new", None),
        slice("grows", Some(&[("cpu", "1")])),
        slice("shrinks", Some(&[("cpu", "2"), ("memory", "1Gi")])),
        slice("revoked", Some(&[("cpu", "2")])),
        slice("gains-a-key", Some(&[("cpu", "2")])),
        slice("denied", None),
    ];
    let decisions = vec![
        grant(Reason::ResourcesGranted, &[("cpu", "2")]),
        grant(Reason::ResourcesGranted, &[("cpu", "2")]),
        grant(Reason::ResourcesClamped, &[("cpu", "1"), ("memory", "0")]),
        grant(Reason::ResourcesRevoked, &[("cpu", "0")]),
        grant(Reason::ResourcesGranted, &[("cpu", "2"), ("pods", "110")]),
        Decision::Set(Verdict {
            status: ConditionStatus::Denied,
            reason: Reason::InsufficientResources,
            message: "short".into(),
            granted: None,
            cordon: false,
        }),
    ];
    // Without a hold, nothing changes.
    assert_eq!(apply_hold(decisions.clone(), &candidates, None), decisions);

    let held = apply_hold(decisions.clone(), &candidates, Some(&hold));
    assert_eq!(
        held[0],
        Decision::Set(Verdict {
            status: ConditionStatus::Denied,
            reason: Reason::EnforcementOff,
            message: "off".into(),
            granted: None,
            cordon: false,
        })
    );
    assert_eq!(held[1], Decision::Keep, "a grant does not grow");
    assert_eq!(held[2], decisions[2], "a shrink goes through");
    assert_eq!(held[3], decisions[3], "a revocation goes through");
    assert_eq!(held[4], Decision::Keep, "no new key");
    assert_eq!(held[5], decisions[5]);
    assert_eq!(Reason::EnforcementOff.as_str(), "LiqoEnforcementOff");
    assert_eq!(
        Reason::EnforcementUnknown.as_str(),
        "LiqoEnforcementUnknown"
    );
}
