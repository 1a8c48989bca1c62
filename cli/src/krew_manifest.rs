//! deploy/krew/broker.yaml, the krew plugin manifest, checked against the
//! build: it parses as krew's `Plugin`, installs the binary this crate
//! builds (`[[bin]]` of cli/Cargo.toml) under the plugin name `broker`
//! (`kubectl broker`), at this crate's version; and deploy/krew/render.sh
//! fills its placeholders from real archives.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn manifest(text: &str) -> Value {
    serde_yaml_ng::from_str(text).expect("the krew manifest is YAML")
}

/// The name of the binary cli/Cargo.toml builds (`[[bin]] name = …`).
fn built_binary() -> String {
    let cargo = std::fs::read_to_string(repo().join("cli/Cargo.toml")).unwrap();
    let bin = &cargo[cargo.find("[[bin]]").expect("a [[bin]] section")..];
    let line = bin
        .lines()
        .find(|l| l.trim_start().starts_with("name"))
        .expect("a bin name");
    line.split('"').nth(1).expect("a quoted name").to_string()
}

fn platforms(m: &Value) -> Vec<Value> {
    m["spec"]["platforms"]
        .as_sequence()
        .expect("spec.platforms")
        .clone()
}

fn platform_name(p: &Value) -> String {
    let labels = &p["selector"]["matchLabels"];
    format!(
        "{}-{}",
        labels["os"].as_str().unwrap(),
        labels["arch"].as_str().unwrap()
    )
}

#[test]
fn the_krew_manifest_installs_the_built_binary() {
    let text = std::fs::read_to_string(repo().join("deploy/krew/broker.yaml")).unwrap();
    let m = manifest(&text);
    assert_eq!(
        m["apiVersion"],
        "krew.googlecontainertools.github.com/v1alpha2"
    );
    assert_eq!(m["kind"], "Plugin");
    // krew links `bin` as kubectl-<name>: `kubectl broker`, as docs/cli.md.
    assert_eq!(m["metadata"]["name"], "broker");
    assert_eq!(
        m["spec"]["version"],
        format!("v{}", env!("CARGO_PKG_VERSION")).as_str()
    );
    assert!(m["spec"]["shortDescription"].as_str().is_some());
    let bin = built_binary();
    assert_eq!(bin, "brokerctl");
    let platforms = platforms(&m);
    let mut names: Vec<String> = platforms.iter().map(platform_name).collect();
    names.sort();
    assert_eq!(
        names,
        ["darwin-amd64", "darwin-arm64", "linux-amd64", "linux-arm64"]
    );
    for p in &platforms {
        let name = platform_name(p);
        assert_eq!(p["bin"].as_str(), Some(bin.as_str()), "{name}");
        let files = p["files"].as_sequence().expect("files");
        assert!(
            files
                .iter()
                .any(|f| f["from"].as_str() == Some(bin.as_str()) && f["to"] == "."),
            "{name}: the archive's {bin} is installed"
        );
        let uri = p["uri"].as_str().expect("uri");
        assert!(
            uri.starts_with("https://")
                && uri.ends_with(&format!(
                    "/brokerctl-v{}-{name}.tar.gz",
                    env!("CARGO_PKG_VERSION")
                )),
            "{uri}"
        );
        let sha = p["sha256"].as_str().expect("sha256");
        assert!(
            sha.len() == 64 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "{sha}"
        );
    }
}

#[test]
fn render_fills_the_manifest_from_the_archives() {
    let dir = tempfile::tempdir().unwrap();
    let staging = dir.path().join("staging");
    std::fs::create_dir(&staging).unwrap();
    let mut shas = Vec::new();
    for platform in ["linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"] {
        // A different binary per platform, so each digest is its own.
        std::fs::write(staging.join("brokerctl"), platform).unwrap();
        let archive = dir
            .path()
            .join(format!("brokerctl-v9.8.7-{platform}.tar.gz"));
        let tar = Command::new("tar")
            .arg("-czf")
            .arg(&archive)
            .arg("-C")
            .arg(&staging)
            .arg("brokerctl")
            .status()
            .unwrap();
        assert!(tar.success());
        let sum = Command::new("sha256sum").arg(&archive).output().unwrap();
        let sum = String::from_utf8(sum.stdout).unwrap();
        shas.push((platform, sum.split(' ').next().unwrap().to_string()));
    }
    let render = |dir: &Path| {
        Command::new("bash")
            .arg(repo().join("deploy/krew/render.sh"))
            .args(["v9.8.7", "https://dl.example/r/", "https://home.example"])
            .arg(dir)
            .output()
            .unwrap()
    };
    let out = render(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m = manifest(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(m["spec"]["version"], "v9.8.7");
    assert_eq!(m["spec"]["homepage"], "https://home.example");
    for p in platforms(&m) {
        let name = platform_name(&p);
        let (_, sha) = shas.iter().find(|(n, _)| *n == name).unwrap();
        assert_eq!(p["sha256"].as_str(), Some(sha.as_str()), "{name}");
        assert_eq!(
            p["uri"].as_str(),
            Some(format!("https://dl.example/r/brokerctl-v9.8.7-{name}.tar.gz").as_str())
        );
        assert_eq!(p["bin"], "brokerctl");
    }
    // A platform without its archive: no manifest.
    std::fs::remove_file(dir.path().join("brokerctl-v9.8.7-darwin-arm64.tar.gz")).unwrap();
    let out = render(dir.path());
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no archive for darwin-arm64"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
