//! `deploy-check`: render `deploy/kubernetes` with `kubectl kustomize`,
//! then check the images, the
//! Dockerfiles, every container's flags against the built binaries'
//! `--help`, and the shipped RBAC against the audit the end-to-end tests
//! wrote (see the library). Exits 1 naming every problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use deploy_check::kubectl::{Kubectl, INSTALLED_PATH, KUBECTL_ENV};
use deploy_check::{audit, checks};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Check deploy/ against the code and the end-to-end tests' audit"
)]
struct Args {
    /// The directory of kustomizations (one per subdirectory).
    #[arg(long, env = "DEPLOY_CHECK_DEPLOY", default_value = "deploy/kubernetes")]
    deploy: PathBuf,
    /// The Dockerfiles (`<image>.Dockerfile`).
    #[arg(long, env = "DEPLOY_CHECK_DOCKER", default_value = "deploy/docker")]
    docker: PathBuf,
    /// The audit records the tests wrote (their KUBE_TEST_AUDIT_DIR).
    #[arg(long, env = "KUBE_TEST_AUDIT_DIR")]
    audit: PathBuf,
    /// Where the built binaries are [default: beside this program].
    #[arg(long, env = "DEPLOY_CHECK_BIN_DIR")]
    bin_dir: Option<PathBuf>,
    /// The kubectl that renders each kustomization (`kubectl kustomize`);
    /// scripts/install-test-deps.sh installs it into build/bin/.
    #[arg(long, env = KUBECTL_ENV, default_value = INSTALLED_PATH)]
    kubectl: PathBuf,
}

fn help_of(dir: &Path, bin: &str) -> Result<String, String> {
    let path = dir.join(bin);
    let out = std::process::Command::new(&path)
        .arg("--help")
        .output()
        .map_err(|e| {
            format!(
                "running {} --help: {e} (build the binaries first)",
                path.display()
            )
        })?;
    if !out.status.success() {
        return Err(format!("{} --help failed: {}", path.display(), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run(args: Args) -> Result<Vec<String>> {
    let bin_dir = match args.bin_dir {
        Some(dir) => dir,
        None => std::env::current_exe()
            .context("locating this program")?
            .parent()
            .map(Path::to_path_buf)
            .context("this program has no directory")?,
    };
    let kubectl = Kubectl::new(args.kubectl);
    let rendered = checks::render_all(&kubectl, &args.deploy)
        .with_context(|| format!("rendering {}", args.deploy.display()))?;
    anyhow::ensure!(
        !rendered.is_empty(),
        "no kustomization.yaml under {}",
        args.deploy.display()
    );
    let records = audit::read_dir(&args.audit)
        .with_context(|| format!("reading the audit in {}", args.audit.display()))?;
    let mut problems = checks::check_images(&rendered);
    problems.extend(checks::check_dockerfiles(&args.docker));
    problems.extend(checks::check_flags(&rendered, &mut |bin| {
        help_of(&bin_dir, bin)
    }));
    problems.extend(checks::check_rbac(&rendered, &records));
    eprintln!(
        "deploy-check: {} kustomizations ({}), {} audit records",
        rendered.len(),
        rendered
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        records.len()
    );
    Ok(problems)
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(problems) if problems.is_empty() => {
            eprintln!("deploy-check: every call allowed, every permission used, images and flags as built");
            ExitCode::SUCCESS
        }
        Ok(problems) => {
            for p in &problems {
                eprintln!("deploy-check: {p}");
            }
            eprintln!("deploy-check: {} problem(s)", problems.len());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("deploy-check: {e:#}");
            ExitCode::FAILURE
        }
    }
}
