//! `deploy-check`: check that the kustomize bases in `deploy/kubernetes`
//! are exactly the Helm chart's rendering and that `helm lint --strict` is
//! clean; render them with `kubectl kustomize`, then check the images, the
//! Dockerfiles, every container's flags against the built binaries'
//! `--help`, and the shipped RBAC against the audit the end-to-end tests
//! wrote (see the library). Exits 1 naming every problem.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Parser;
use deploy_check::helm::{self, Helm, HELM_ENV};
use deploy_check::kubectl::{Kubectl, INSTALLED_PATH, KUBECTL_ENV};
use deploy_check::{audit, bases, checks};

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Check deploy/ against the chart, the code and the end-to-end tests' audit",
    subcommand_negates_reqs = true,
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// The directory of kustomizations (one per subdirectory).
    #[arg(long, env = "DEPLOY_CHECK_DEPLOY", default_value = "deploy/kubernetes")]
    deploy: PathBuf,
    /// The Dockerfiles (`<image>.Dockerfile`).
    #[arg(long, env = "DEPLOY_CHECK_DOCKER", default_value = "deploy/docker")]
    docker: PathBuf,
    /// The audit records the tests wrote (their KUBE_TEST_AUDIT_DIR).
    #[arg(long, env = "KUBE_TEST_AUDIT_DIR", required = true)]
    audit: Option<PathBuf>,
    #[command(flatten)]
    chart: ChartArgs,
    /// Where the built binaries are [default: beside this program].
    #[arg(long, env = "DEPLOY_CHECK_BIN_DIR")]
    bin_dir: Option<PathBuf>,
    /// The kubectl that renders each kustomization (`kubectl kustomize`);
    /// scripts/install-test-deps.sh installs it into build/bin/.
    #[arg(long, env = KUBECTL_ENV, default_value = INSTALLED_PATH)]
    kubectl: PathBuf,
}

/// The chart the kustomize bases are generated from.
#[derive(Debug, clap::Args)]
struct ChartArgs {
    /// The Helm chart the bases of `--deploy` are rendered from (with
    /// `<deploy>/bases.yaml`'s values).
    #[arg(long, env = "DEPLOY_CHECK_CHART", default_value = "charts/liqo-broker")]
    chart: PathBuf,
    /// The helm that renders and lints the chart;
    /// scripts/install-test-deps.sh installs it into build/bin/.
    #[arg(long, env = HELM_ENV, default_value = helm::INSTALLED_PATH)]
    helm: PathBuf,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Write the kustomize bases of `--deploy` from the chart (what
    /// scripts/render-manifests.sh runs), replacing their files.
    RenderBases {
        /// The directory of kustomizations, holding bases.yaml.
        #[arg(long, env = "DEPLOY_CHECK_DEPLOY", default_value = "deploy/kubernetes")]
        deploy: PathBuf,
        #[command(flatten)]
        chart: ChartArgs,
    },
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

fn render_bases(deploy: &Path, chart: &ChartArgs) -> Result<()> {
    let rendered = bases::render(&Helm::new(&chart.helm), &chart.chart, deploy)
        .with_context(|| format!("rendering {}", chart.chart.display()))?;
    bases::write(deploy, &rendered)?;
    eprintln!(
        "deploy-check: wrote {} from {}",
        rendered
            .iter()
            .map(|b| deploy.join(&b.name).display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        chart.chart.display()
    );
    Ok(())
}

/// The bases are the chart's rendering, and the chart lints clean.
fn check_chart(deploy: &Path, chart: &ChartArgs) -> Result<Vec<String>> {
    let helm = Helm::new(&chart.helm);
    let rendered = bases::render(&helm, &chart.chart, deploy)
        .with_context(|| format!("rendering {}", chart.chart.display()))?;
    let mut problems = bases::differences(deploy, &rendered)?;
    problems.extend(bases::lint(&helm, &chart.chart, deploy)?);
    Ok(problems)
}

fn run(args: Args) -> Result<Vec<String>> {
    let audit_dir = args.audit.context("--audit is required")?;
    let bin_dir = match args.bin_dir {
        Some(dir) => dir,
        None => std::env::current_exe()
            .context("locating this program")?
            .parent()
            .map(Path::to_path_buf)
            .context("this program has no directory")?,
    };
    let mut problems = check_chart(&args.deploy, &args.chart)?;
    let kubectl = Kubectl::new(args.kubectl);
    let rendered = checks::render_all(&kubectl, &args.deploy)
        .with_context(|| format!("rendering {}", args.deploy.display()))?;
    anyhow::ensure!(
        !rendered.is_empty(),
        "no kustomization.yaml under {}",
        args.deploy.display()
    );
    let records = audit::read_dir(&audit_dir)
        .with_context(|| format!("reading the audit in {}", audit_dir.display()))?;
    problems.extend(checks::check_images(&rendered));
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
    let args = Args::parse();
    if let Some(Command::RenderBases { deploy, chart }) = &args.command {
        return match render_bases(deploy, chart) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("deploy-check: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match run(args) {
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
