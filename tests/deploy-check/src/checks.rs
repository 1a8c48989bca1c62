//! The checks over the repository's `deploy/` tree, each returning what is
//! wrong as sentences (empty: nothing): images and Dockerfiles, container
//! flags against the binaries, RBAC against the audit. The binary runs
//! them all; the crate's tests run those that need no build.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::audit::Record;
use crate::dockerfile;
use crate::kubectl::{Kubectl, RenderError, KUSTOMIZATION_FILES};
use crate::rbac::{self, Policy};
use crate::workloads::{self, image_name, Container};

/// One image: `liqo-broker/<image>`, built by `deploy/docker/<image>.Dockerfile`
/// from `cargo build -p <package> --bin <bin>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Component {
    pub image: &'static str,
    pub package: &'static str,
    pub bin: &'static str,
}

/// Every image the repository ships.
pub const COMPONENTS: [Component; 9] = [
    Component {
        image: "catalog",
        package: "catalog",
        bin: "catalog",
    },
    Component {
        image: "resource-monitor",
        package: "resource-monitor",
        bin: "resource-monitor",
    },
    Component {
        image: "aggregator",
        package: "aggregator",
        bin: "aggregator",
    },
    Component {
        image: "provider-agent",
        package: "provider-agent",
        bin: "provider-agent",
    },
    Component {
        image: "orchestrator",
        package: "orchestrator",
        bin: "orchestrator",
    },
    Component {
        image: "purchase-controller",
        package: "purchase-controller",
        bin: "purchase-controller",
    },
    Component {
        image: "peering-user-controller",
        package: "peering-users",
        bin: "peering-user-controller",
    },
    Component {
        image: "service-controller",
        package: "service-controller",
        bin: "service-controller",
    },
    Component {
        image: "market-autoscaler",
        package: "market-autoscaler",
        bin: "market-autoscaler",
    },
];

/// Images are named `liqo-broker/<component>` in the manifests.
pub const IMAGE_PREFIX: &str = "liqo-broker/";

/// One rendered `deploy/kubernetes/<name>`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Rendered {
    pub name: String,
    pub objects: Vec<Value>,
}

/// Render, with `kubectl kustomize`, every directory of `deploy` that
/// holds a kustomization, in the order of their names.
pub fn render_all(kubectl: &Kubectl, deploy: &Path) -> Result<Vec<Rendered>, RenderError> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(deploy)
        .map_err(|error| RenderError::Io {
            path: deploy.to_path_buf(),
            error,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| KUSTOMIZATION_FILES.iter().any(|f| p.join(f).is_file()))
        .collect();
    dirs.sort();
    let rendered = kubectl.render_each(&dirs)?;
    Ok(dirs
        .iter()
        .zip(rendered)
        .map(|(dir, objects)| Rendered {
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            objects,
        })
        .collect())
}

/// The component a container runs, from its image, under any registry
/// (the chart requires one; the bases name `registry.invalid`).
pub fn component_of(container: &Container) -> Option<Component> {
    let name = without_registry(image_name(&container.image)).strip_prefix(IMAGE_PREFIX)?;
    COMPONENTS.into_iter().find(|c| c.image == name)
}

/// An image name less its registry: the first path component when it is
/// a host (holds a `.` or a `:`, or is `localhost`), as Docker reads a
/// reference (`distribution/reference`'s `splitDockerDomain`).
fn without_registry(name: &str) -> &str {
    match name.split_once('/') {
        Some((host, rest)) if host.contains(['.', ':']) || host == "localhost" => rest,
        _ => name,
    }
}

/// Every container runs one of our images, through its ENTRYPOINT.
pub fn check_images(rendered: &[Rendered]) -> Vec<String> {
    let mut out = Vec::new();
    for r in rendered {
        for c in workloads::containers(&r.objects) {
            if component_of(&c).is_none() {
                out.push(format!(
                    "{}: {} container {}: image {} is not one of {IMAGE_PREFIX}{{{}}}",
                    r.name,
                    c.workload,
                    c.name,
                    c.image,
                    COMPONENTS.map(|c| c.image).join(",")
                ));
            }
            if c.command.is_some() {
                out.push(format!(
                    "{}: {} container {}: sets `command`; the image's ENTRYPOINT is the binary",
                    r.name, c.workload, c.name
                ));
            }
        }
    }
    out
}

/// Every component has a Dockerfile that builds and ships it properly, and
/// no Dockerfile is anything else: never two recipes for one image
/// (`dockerfile` holds each file to one recipe, this the directory).
pub fn check_dockerfiles(docker: &Path) -> Vec<String> {
    let mut out = Vec::new();
    match std::fs::read_dir(docker) {
        Err(e) => out.push(format!("{}: {e}", docker.display())),
        Ok(entries) => {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let image = name.strip_suffix(".Dockerfile");
                if image.is_some_and(|i| !COMPONENTS.iter().any(|c| c.image == i)) {
                    out.push(format!(
                        "{}: no component ships this image; a second recipe for one is refused",
                        entry.path().display()
                    ));
                }
            }
        }
    }
    for component in COMPONENTS {
        let path = docker.join(format!("{}.Dockerfile", component.image));
        match std::fs::read_to_string(&path) {
            Err(e) => out.push(format!("{}: {e}", path.display())),
            Ok(text) => out.extend(
                dockerfile::problems(&text, component.package, component.bin)
                    .into_iter()
                    .map(|p| format!("{}: {p}", path.display())),
            ),
        }
    }
    out
}

/// Every container's flags and variables are known to its binary's
/// `--help`, which `help` returns for a binary name.
pub fn check_flags(
    rendered: &[Rendered],
    help: &mut dyn FnMut(&str) -> Result<String, String>,
) -> Vec<String> {
    let mut out = Vec::new();
    for r in rendered {
        for c in workloads::containers(&r.objects) {
            let Some(component) = component_of(&c) else {
                continue;
            };
            match help(component.bin) {
                Err(e) => out.push(format!("{}: {}: {e}", r.name, component.bin)),
                Ok(text) => {
                    let accepted = workloads::accepted(&text);
                    for unknown in workloads::unknown(&c, &accepted) {
                        out.push(format!(
                            "{}: {} container {}: {} does not accept {unknown}",
                            r.name, c.workload, c.name, component.bin
                        ));
                    }
                }
            }
        }
    }
    out
}

/// The RBAC of every rendered directory against the audit records.
pub fn check_rbac(rendered: &[Rendered], records: &[Record]) -> Vec<String> {
    let mut policy = Policy::default();
    let mut out = Vec::new();
    for r in rendered {
        match Policy::from_objects(&r.objects) {
            Ok(p) => policy.extend(p),
            Err(e) => out.push(format!("{}: {e}", r.name)),
        }
    }
    out.extend(
        rbac::check(&policy, records)
            .into_iter()
            .map(|f| f.to_string()),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registry_is_no_part_of_the_component() {
        let of = |image: &str| {
            component_of(&Container {
                workload: String::new(),
                name: String::new(),
                image: image.to_string(),
                command: None,
                args: Vec::new(),
                env: Vec::new(),
            })
            .map(|c| c.image)
        };
        assert_eq!(
            of("registry.invalid/liqo-broker/catalog:0.1.0"),
            Some("catalog")
        );
        assert_eq!(of("host:5000/liqo-broker/aggregator"), Some("aggregator"));
        assert_eq!(of("liqo-broker/catalog:0.1.0"), Some("catalog"));
        assert_eq!(of("someone/liqo-broker/catalog:0.1.0"), None);
        assert_eq!(of("registry.invalid/other/catalog:0.1.0"), None);
    }

    #[test]
    fn a_dockerfile_no_component_ships_is_a_second_recipe() {
        let docker = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/docker");
        let copy = tempfile::tempdir().unwrap();
        for component in COMPONENTS {
            let name = format!("{}.Dockerfile", component.image);
            std::fs::copy(docker.join(&name), copy.path().join(&name)).unwrap();
        }
        assert_eq!(check_dockerfiles(copy.path()), Vec::<String>::new());
        std::fs::copy(
            docker.join("catalog.Dockerfile"),
            copy.path().join("catalog-debug.Dockerfile"),
        )
        .unwrap();
        let found = check_dockerfiles(copy.path());
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("catalog-debug.Dockerfile: no component ships this image"));
    }
}
