//! The provider self-check: does Liqo on this cluster enforce what this
//! class grants? Pure decisions here; the task that reads Liqo's settings is
//! [`reader`].
//!
//! A grant only bounds a consumer if Liqo enforces the Quota made from it.
//! In Liqo v1.2.0 that is two settings, neither of which a class controller
//! can change (`../shared/spec/liqo-v1-behaviour.md`, "The life of a
//! ResourceSlice", item 6):
//! - `controllerManager.config.enableResourceEnforcement` (Helm default
//!   `true`) reaches the ShadowPod webhook as the flag
//!   `--enable-resource-enforcement` of the `liqo-webhook` Deployment
//!   (`deployments/liqo/templates/liqo-webhook-deployment.yaml:66-68`; a
//!   pflag bool, default false: `cmd/webhook/main.go:90`). Off, the webhook
//!   admits every offloaded pod whatever the Quota says
//!   (`pkg/webhooks/shadowpod/webhook.go:111-113`);
//! - `controllerManager.config.defaultLimitsEnforcement` (Helm default
//!   `None`) reaches the quota creator as `--default-limits-enforcement` of
//!   the `liqo-controller-manager` Deployment
//!   (`templates/liqo-controller-manager-deployment.yaml:57`,
//!   `pkg/liqo-controller-manager/flags.go:58`), which writes it into every
//!   Quota on each reconcile (`quotacreator_controller.go:98`): `None` lets
//!   pods without requests through uncounted, `Soft` needs requests, `Hard`
//!   needs limits equal to requests
//!   (`pkg/webhooks/shadowpod/spdescription.go:130-146`).
//!
//! What is read is an [`Observed`]; its [`Level`] is what the metric, the
//! log, `/readyz` and the catalog show. [`SoldAsEnforced`] (the flag
//! `--sold-as-enforced`) says what the capacity is sold as, and
//! [`UnknownPolicy`] what to do when the settings cannot be read; together
//! they give a [`Hold`], and [`apply_hold`] turns the policy's decisions into
//! ones that grant nothing new while it stands (grants held are kept or
//! shrunk, never grown; revocations go through).

pub mod reader;

use quantity::ResourceList;

use crate::decision::{Candidate, Decision, Reason, Verdict};
use crate::model::ConditionStatus;

/// The webhook's flag that turns the Quota check on.
pub const ENFORCEMENT_FLAG: &str = "--enable-resource-enforcement";
/// The controller-manager's flag that sets every Quota's level.
pub const LIMITS_FLAG: &str = "--default-limits-enforcement";

/// Liqo's `offloadingv1beta1.LimitsEnforcement`
/// (`apis/offloading/v1beta1/quota_types.go:25-32`), ordered by strictness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LimitsLevel {
    None,
    Soft,
    Hard,
}

impl LimitsLevel {
    /// Liqo compares the values exactly (`== HardLimitsEnforcement`) and
    /// the Quota CRD's enum is `Hard;Soft;None`: any other spelling (the
    /// flag's own default `none`, say) is not one of them.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value {
            "None" => Ok(LimitsLevel::None),
            "Soft" => Ok(LimitsLevel::Soft),
            "Hard" => Ok(LimitsLevel::Hard),
            other => Err(format!(
                "{LIMITS_FLAG}={other:?} is none of Liqo's levels None, Soft, Hard"
            )),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LimitsLevel::None => "None",
            LimitsLevel::Soft => "Soft",
            LimitsLevel::Hard => "Hard",
        }
    }
}

/// Liqo's settings as last read: each known, or why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The webhook's `--enable-resource-enforcement`.
    pub resource_enforcement: Result<bool, String>,
    /// The controller-manager's `--default-limits-enforcement`.
    pub limits: Result<LimitsLevel, String>,
}

impl Observed {
    /// Nothing read yet.
    pub fn unread() -> Self {
        let why = "not read yet".to_string();
        Observed {
            resource_enforcement: Err(why.clone()),
            limits: Err(why),
        }
    }

    /// The level shown to operators and buyers.
    pub fn level(&self) -> Level {
        match (&self.resource_enforcement, &self.limits) {
            (Ok(false), _) => Level::Off,
            (Ok(true), Ok(limits)) => Level::On(*limits),
            _ => Level::Unknown,
        }
    }

    /// One line for the log and `/readyz`.
    pub fn describe(&self) -> String {
        let enforcement = match &self.resource_enforcement {
            Ok(true) => "on".to_string(),
            Ok(false) => "off".to_string(),
            Err(why) => format!("unknown ({why})"),
        };
        let limits = match &self.limits {
            Ok(level) => level.as_str().to_string(),
            Err(why) => format!("unknown ({why})"),
        };
        format!("Liqo resource enforcement {enforcement}, defaultLimitsEnforcement {limits}")
    }
}

/// How strictly Liqo enforces grants on this provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Level {
    /// The ShadowPod webhook does not check Quotas.
    Off,
    /// It checks them, at this limits level.
    On(LimitsLevel),
    /// The settings could not be read.
    Unknown,
}

impl Level {
    /// The metric's `level` label (one of
    /// [`crate::metrics::ENFORCEMENT_LEVELS`]).
    pub fn label(self) -> &'static str {
        match self {
            Level::Off => "off",
            Level::On(LimitsLevel::None) => "none",
            Level::On(LimitsLevel::Soft) => "soft",
            Level::On(LimitsLevel::Hard) => "hard",
            Level::Unknown => "unknown",
        }
    }
}

/// `--sold-as-enforced`: the enforcement the capacity of this class is sold
/// with; new grants need Liqo's settings to be at least this.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum SoldAsEnforced {
    /// Not sold as enforced: the settings are reported, never acted on.
    No,
    /// Liqo's resource enforcement on (the ShadowPod webhook holds the sum
    /// of each consumer's pod requests to its Quota), any limits level.
    #[default]
    On,
    /// On, with `defaultLimitsEnforcement` `Soft` or `Hard` (every pod
    /// declares requests, so none escapes the count).
    Soft,
    /// On, with `defaultLimitsEnforcement` `Hard` (limits equal requests:
    /// a consumer cannot exceed its Quota at run time).
    Hard,
}

/// `--if-enforcement-unknown`: what to do while Liqo's settings cannot be
/// read (RBAC denied, Deployment missing or renamed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, clap::ValueEnum)]
pub enum UnknownPolicy {
    /// Grant as if the settings were met (and say they are unknown).
    #[default]
    Grant,
    /// Grant nothing new until they are read and met.
    Refuse,
}

/// Why new grants are refused, while it stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub reason: Reason,
    pub message: String,
}

/// Whether what is `observed` meets what is `sold`; `None`: grant as usual.
pub fn hold(observed: &Observed, sold: SoldAsEnforced, unknown: UnknownPolicy) -> Option<Hold> {
    let needed = match sold {
        SoldAsEnforced::No => return None,
        SoldAsEnforced::On => None,
        SoldAsEnforced::Soft => Some(LimitsLevel::Soft),
        SoldAsEnforced::Hard => Some(LimitsLevel::Hard),
    };
    let unknown_hold = |why: &str| {
        match unknown {
        UnknownPolicy::Grant => None,
        UnknownPolicy::Refuse => Some(Hold {
            reason: Reason::EnforcementUnknown,
            message: format!(
                "Liqo's resource enforcement on this provider cannot be read ({why}): capacity sold as enforced is not granted until it is"
            ),
        }),
    }
    };
    match &observed.resource_enforcement {
        Ok(false) => {
            return Some(Hold {
                reason: Reason::EnforcementOff,
                message: format!(
                    "Liqo's resource enforcement is off on this provider (its webhook runs without {ENFORCEMENT_FLAG}; Helm controllerManager.config.enableResourceEnforcement): capacity sold as enforced is not granted"
                ),
            })
        }
        Err(why) => return unknown_hold(why),
        Ok(true) => {}
    }
    let needed = needed?;
    match &observed.limits {
        Ok(level) if *level >= needed => None,
        Ok(level) => Some(Hold {
            reason: Reason::EnforcementOff,
            message: format!(
                "Liqo's defaultLimitsEnforcement is {} on this provider, below the {} this capacity is sold with: not granted",
                level.as_str(),
                needed.as_str()
            ),
        }),
        Err(why) => unknown_hold(why),
    }
}

/// The policy's `decisions` (one per candidate, in order) made to grant
/// nothing new under `hold`: a slice holding no grant is denied with the
/// hold's reason; one holding a grant keeps it, or takes a smaller one (a
/// shrink or a revocation only ever lowers what Liqo enforces); denials
/// and revocations are left as they are.
pub fn apply_hold(
    decisions: Vec<Decision>,
    candidates: &[Candidate],
    hold: Option<&Hold>,
) -> Vec<Decision> {
    let Some(hold) = hold else {
        return decisions;
    };
    decisions
        .into_iter()
        .zip(candidates)
        .map(|(decision, slice)| match decision {
            Decision::Set(verdict)
                if verdict.status == ConditionStatus::Accepted
                    && verdict.reason != Reason::ResourcesRevoked =>
            {
                held_back(verdict, slice, hold)
            }
            other => other,
        })
        .collect()
}

fn held_back(verdict: Verdict, slice: &Candidate, hold: &Hold) -> Decision {
    let granted = verdict.granted.clone().unwrap_or_default();
    match &slice.accepted {
        Some(held) if !slice.legacy && at_most(&granted, held) => Decision::Set(verdict),
        Some(_) if !slice.legacy => Decision::Keep,
        _ => Decision::Set(Verdict {
            status: ConditionStatus::Denied,
            reason: hold.reason,
            message: hold.message.clone(),
            granted: None,
            cordon: false,
        }),
    }
}

/// Whether every key of `grant` is held, at a value no higher.
fn at_most(grant: &ResourceList, held: &ResourceList) -> bool {
    grant
        .0
        .iter()
        .all(|(name, q)| held.get(name).is_some_and(|h| q <= h))
}

/// The value a pflag-parsed command line gives `flag` (`--flag=value` or
/// `--flag value`; the last one wins, as pflag sets it again), or `None`
/// when it is absent. A bool flag given bare reads as `true`.
pub fn flag_value(args: &[String], flag: &str, boolean: bool) -> Option<String> {
    let mut value = None;
    let mut words = args.iter().peekable();
    while let Some(word) = words.next() {
        if word == "--" {
            break;
        }
        if let Some(v) = word
            .strip_prefix(flag)
            .and_then(|rest| rest.strip_prefix('='))
        {
            value = Some(v.to_string());
        } else if word == flag {
            value = if boolean {
                Some("true".to_string())
            } else {
                words.next().cloned()
            };
        }
    }
    value
}

/// The webhook's `--enable-resource-enforcement`, from its containers'
/// command lines (pflag's bool: `strconv.ParseBool`; absent is false).
pub fn resource_enforcement(args: &[String]) -> Result<bool, String> {
    match flag_value(args, ENFORCEMENT_FLAG, true).as_deref() {
        None => Ok(false),
        Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
        Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
        Some(other) => Err(format!("{ENFORCEMENT_FLAG}={other:?} is not a bool")),
    }
}

/// The controller-manager's `--default-limits-enforcement`; absent, the
/// flag's default `none`, which is not one of Liqo's levels.
pub fn limits_level(args: &[String]) -> Result<LimitsLevel, String> {
    let value = flag_value(args, LIMITS_FLAG, false).unwrap_or_else(|| "none".to_string());
    LimitsLevel::parse(&value)
}

#[cfg(test)]
mod tests;
