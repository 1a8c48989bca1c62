//! Every binary reads durations with the one grammar of `edge::duration`
//! (`500ms`, `30s`, `1h 30m`, `7d`, bare seconds): the same spellings are
//! accepted and refused, with the same message, whichever binary is asked.

use std::process::Command;

use e2e::process::bin_path;

/// One duration flag of each binary.
const FLAGS: &[(&str, &str)] = &[
    ("catalog", "--mongodb-timeout"),
    ("resource-monitor", "--handshake-timeout"),
    ("aggregator", "--upstream-timeout"),
    ("provider-agent", "--debounce"),
];

/// Run `bin flag=value --no-such-flag` and return clap's complaint. clap
/// checks arguments in order, so a complaint about `--no-such-flag` means
/// the duration was accepted.
fn complaint(bin: &str, flag: &str, value: &str) -> String {
    let out = Command::new(bin_path(bin))
        .args([format!("{flag}={value}").as_str(), "--no-such-flag"])
        .env_clear()
        .output()
        .expect("run the binary");
    assert!(!out.status.success(), "{bin} {flag} {value} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn every_binary_accepts_the_same_spellings() {
    for (bin, flag) in FLAGS {
        for value in ["500ms", "30s", "5m", "1h 30m", "7d", "90", "1.5s"] {
            let err = complaint(bin, flag, value);
            assert!(
                err.contains("--no-such-flag"),
                "{bin} {flag} {value:?} was refused: {err}"
            );
        }
    }
}

#[test]
fn every_binary_refuses_the_same_spellings_with_the_same_hint() {
    for value in ["fast", "5x", "-5s", "0.5", "1 fortnight"] {
        let mut messages = Vec::new();
        for (bin, flag) in FLAGS {
            let err = complaint(bin, flag, value);
            assert!(
                !err.contains("--no-such-flag") && err.contains(flag),
                "{bin} {flag} {value:?} was not refused: {err}"
            );
            assert!(
                err.contains("write e.g."),
                "{bin} {flag} {value:?}: the message does not show the grammar: {err}"
            );
            let reason = err
                .lines()
                .find(|l| l.contains("duration"))
                .map(|l| l[l.find("duration").unwrap_or(0)..].to_string())
                .unwrap_or_default();
            messages.push(reason);
        }
        assert!(
            messages.windows(2).all(|w| w[0] == w[1]),
            "{value:?}: the binaries explain it differently: {messages:#?}"
        );
    }
}
