//! The `aggregator` command line: help states the policy and its default;
//! bad flags and bad files are refused before anything starts, naming what
//! is wrong (the key and line, for files).

use anyhow::Result;
use e2e::Spawn;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn help_states_every_flag_and_the_default_policy() -> Result<()> {
    let out = Spawn::new("aggregator").arg("--help").output()?;
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "--listen",
        "--upstream <CLUSTER_ID=ADDR>",
        "--liqo-api",
        "--config",
        "--policy",
        "--max-age",
        "--upstream-timeout",
        "--metrics-listen",
        "--max-connections-per-peer",
        "--handshake-timeout",
        "--first-sync-timeout",
        "AGGREGATOR_HANDSHAKE_TIMEOUT",
        "[default: last-known]",
        "[default: 30s]",
        "AGGREGATOR_UPSTREAMS",
    ] {
        assert!(help.contains(needle), "--help lacks {needle:?}:\n{help}");
    }
    Ok(())
}

#[test]
fn bad_flags_are_refused() -> Result<()> {
    // Refused before binding anything, so any port will do.
    let listen = "127.0.0.1:0".to_string();
    for (args, needle) in [
        (
            vec!["--listen", &listen, "--upstream", "no-equals-sign"],
            "CLUSTER_ID=ADDR",
        ),
        (
            vec!["--listen", &listen, "--upstream", "a b=127.0.0.1:1"],
            "contains ' '",
        ),
        (
            vec!["--listen", &listen, "--liqo-api", "v3"],
            "unknown Liqo API",
        ),
        (
            vec!["--listen", &listen, "--policy", "sometimes"],
            "sometimes",
        ),
        (
            vec!["--listen", &listen, "--max-age", "forever"],
            "invalid duration",
        ),
        (vec!["--upstream", "a=127.0.0.1:1"], "no listen address"),
        (
            vec![
                "--listen",
                &listen,
                "--upstream",
                "a=127.0.0.1:1",
                "--upstream",
                "a=127.0.0.1:2",
            ],
            "configured twice",
        ),
    ] {
        let out = Spawn::new("aggregator").args(&args).output()?;
        assert!(!out.status.success(), "{args:?} was accepted");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    Ok(())
}

#[test]
fn bad_config_files_name_the_key_and_line() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("aggregator.toml");
    let listen = "127.0.0.1:0";
    for (text, needles) in [
        (
            "[[upstream]]\ncluster_id = \"a\"\naddres = \"127.0.0.1:1\"\n",
            vec!["line 3", "addres"],
        ),
        (
            "[policy]\nmode = \"omit\"\nmax_age = \"soon\"\n",
            vec!["line 3", "invalid duration"],
        ),
        ("upstream_timeout = 5\n", vec!["line 1", "upstream_timeout"]),
    ] {
        std::fs::write(&file, text)?;
        let out = Spawn::new("aggregator")
            .arg("--config")
            .arg(&file)
            .args(["--listen", listen])
            .output()?;
        assert!(!out.status.success(), "{text:?} was accepted");
        for needle in needles {
            assert!(stderr(&out).contains(needle), "{text:?}: {}", stderr(&out));
        }
    }
    Ok(())
}
