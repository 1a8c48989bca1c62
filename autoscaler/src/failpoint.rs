//! Failpoints for the leader-kill tests: the environment variable
//! `MARKET_AUTOSCALER_FAILPOINT=<step>`, read once at start, makes the
//! process exit with status 3 right after that step of a purchase or a
//! give-back — the moment a leader could die in production — so a test can
//! check that the next leader finishes the job without buying twice.
//! Unset (always, outside tests) nothing happens. Documented in
//! docs/autoscaling.md, "Testing".

use std::sync::OnceLock;

/// The environment variable naming the step.
pub const VAR: &str = "MARKET_AUTOSCALER_FAILPOINT";

/// The exit status of a process stopped at a failpoint.
pub const EXIT_STATUS: i32 = 3;

/// The steps a failpoint can follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `status.inFlight` and `purchasesMade` written, the Purchase not yet created.
    AfterStatusWrite,
    /// The Purchase created, not yet Ready.
    AfterPurchaseCreate,
    /// A Purchase seen Ready and taken out of `status.inFlight`.
    AfterReady,
    /// Pods evicted from a node given back, its Purchase not yet deleted.
    BeforeCancel,
}

impl Step {
    pub const ALL: [Step; 4] = [
        Step::AfterStatusWrite,
        Step::AfterPurchaseCreate,
        Step::AfterReady,
        Step::BeforeCancel,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Step::AfterStatusWrite => "after-status-write",
            Step::AfterPurchaseCreate => "after-purchase-create",
            Step::AfterReady => "after-ready",
            Step::BeforeCancel => "before-cancel",
        }
    }

    pub fn parse(text: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

/// The step set for this process (the variable read once).
fn armed() -> Option<Step> {
    static ARMED: OnceLock<Option<Step>> = OnceLock::new();
    *ARMED.get_or_init(|| {
        let text = std::env::var(VAR).ok()?;
        let step = Step::parse(text.trim());
        if step.is_none() {
            tracing::warn!(value = %text, "{VAR} names no step; ignored");
        }
        step
    })
}

/// Read the variable now (at start), so a bad value is logged once early.
pub fn init() {
    if let Some(step) = armed() {
        tracing::warn!(
            step = step.as_str(),
            "failpoint armed: the process exits after this step"
        );
    }
}

/// `step` has just been done: exit with [`EXIT_STATUS`] when it is armed.
pub fn reached(step: Step) {
    if armed() == Some(step) {
        tracing::warn!(step = step.as_str(), "failpoint reached; exiting");
        std::process::exit(EXIT_STATUS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_parses_from_its_name_and_nothing_else_does() {
        for step in Step::ALL {
            assert_eq!(Step::parse(step.as_str()), Some(step));
        }
        assert_eq!(Step::parse("after-ready "), None);
        assert_eq!(Step::parse(""), None);
    }
}
