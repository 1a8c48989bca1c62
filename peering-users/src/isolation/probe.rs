//! The isolation probe: a short-lived pod pair that shows whether this
//! cluster's CNI enforces the rendered policies. Liqo does not document
//! whether a CNI's policy hook sees traffic delivered through its gateway
//! (`liqo-network-isolation.md` §4), so a provider proves at least that
//! its CNI enforces them between two consumers here.
//!
//! Two namespaces the controller makes (`--isolation-probe-namespaces`,
//! `liqo-broker-probe-a` and `-b`) are labelled as two consumers'
//! (`liqo.io/remote-cluster-id`), so isolation renders its policy in each.
//! A run starts a server in the first, then two clients: one beside it
//! (which must connect: the network works) and one in the second (which
//! must not: a stranger is kept out). The verdict ([`verdict`], pure):
//! `enforced` when exactly that happened, `failed` when the stranger got
//! through, otherwise inconclusive (the reason said: image not pulled, no
//! address, the control did not connect, time out). The pods are deleted
//! after each run.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, Pod, PodSecurityContext, PodSpec,
    ResourceRequirements, SeccompProfile, SecurityContext, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The probe's pods carry this label (and only they are deleted).
pub const PROBE_LABEL: &str = "broker.liqo-broker.io/isolation-probe";
/// The server's port.
pub const PORT: i32 = 8080;

pub const SERVER: &str = "probe-server";
/// The client beside the server: must connect.
pub const CONTROL: &str = "probe-control";
/// The client in the other consumer's namespace: must not.
pub const STRANGER: &str = "probe-stranger";

/// How a pod of the probe ended, as its status says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// `Succeeded`: the client connected.
    Connected,
    /// `Failed`: it could not.
    Refused,
    /// Not ended (yet): the reason, if the status gives one.
    Pending(String),
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Enforced,
    Failed(String),
    Inconclusive(String),
}

/// How a client pod ended, from its status.
pub fn ended(pod: &Pod) -> Ended {
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") => Ended::Connected,
        Some("Failed") => Ended::Refused,
        phase => {
            let waiting = status
                .and_then(|s| s.container_statuses.as_ref())
                .into_iter()
                .flatten()
                .find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone());
            Ended::Pending(
                waiting.unwrap_or_else(|| format!("phase {}", phase.unwrap_or("unknown"))),
            )
        }
    }
}

/// The verdict from how the control and the stranger ended.
pub fn verdict(control: &Ended, stranger: &Ended) -> Verdict {
    match (control, stranger) {
        (_, Ended::Connected) => Verdict::Failed(
            "a pod of another consumer's namespace connected to the probe's server".into(),
        ),
        (Ended::Connected, Ended::Refused) => Verdict::Enforced,
        (Ended::Refused, _) => Verdict::Inconclusive(
            "the control client beside the server could not connect either: the probe proves nothing".into(),
        ),
        (Ended::Pending(why), _) => {
            Verdict::Inconclusive(format!("the control client did not finish: {why}"))
        }
        (_, Ended::Pending(why)) => {
            Verdict::Inconclusive(format!("the stranger client did not finish: {why}"))
        }
    }
}

fn meta(namespace: &str, name: &str, role: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(namespace.into()),
        labels: Some(BTreeMap::from([(PROBE_LABEL.into(), role.into())])),
        ..ObjectMeta::default()
    }
}

/// Pod Security `restricted`, small and short-lived: no token, no
/// privilege, nobody's user.
fn spec(image: &str, command: Vec<String>, port: Option<i32>, timeout: Duration) -> PodSpec {
    let limits = BTreeMap::from([
        ("cpu".to_string(), Quantity("50m".into())),
        ("memory".to_string(), Quantity("16Mi".into())),
    ]);
    PodSpec {
        restart_policy: Some("Never".into()),
        automount_service_account_token: Some(false),
        active_deadline_seconds: Some(timeout.as_secs().max(1) as i64),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65534),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                localhost_profile: None,
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![Container {
            name: "probe".into(),
            image: Some(image.into()),
            command: Some(command),
            ports: port.map(|p| {
                vec![ContainerPort {
                    container_port: p,
                    ..ContainerPort::default()
                }]
            }),
            resources: Some(ResourceRequirements {
                requests: Some(limits.clone()),
                limits: Some(limits),
                ..ResourceRequirements::default()
            }),
            security_context: Some(SecurityContext {
                allow_privilege_escalation: Some(false),
                read_only_root_filesystem: Some(true),
                capabilities: Some(Capabilities {
                    drop: Some(vec!["ALL".into()]),
                    add: None,
                }),
                ..SecurityContext::default()
            }),
            volume_mounts: Some(vec![VolumeMount {
                name: "www".into(),
                mount_path: "/www".into(),
                ..VolumeMount::default()
            }]),
            ..Container::default()
        }],
        volumes: Some(vec![Volume {
            name: "www".into(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    }
}

/// busybox's httpd serving one page on [`PORT`].
pub fn server(namespace: &str, image: &str, timeout: Duration) -> Pod {
    let script = format!("echo ok > /www/index.html && exec httpd -f -p {PORT} -h /www");
    Pod {
        metadata: meta(namespace, SERVER, "server"),
        spec: Some(spec(
            image,
            vec!["sh".into(), "-c".into(), script],
            Some(PORT),
            timeout,
        )),
        status: None,
    }
}

/// busybox's wget of the server's page at `ip`: exits 0 when it connects.
pub fn client(namespace: &str, name: &str, image: &str, ip: &str, timeout: Duration) -> Pod {
    let wait = timeout.as_secs().clamp(1, 10);
    Pod {
        metadata: meta(namespace, name, "client"),
        spec: Some(spec(
            image,
            vec![
                "wget".into(),
                "-T".into(),
                wait.to_string(),
                "-q".into(),
                "-O".into(),
                "/dev/null".into(),
                format!("http://{ip}:{PORT}/"),
            ],
            None,
            timeout,
        )),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_working_control_and_a_refused_stranger_prove_enforcement() {
        let pending = || Ended::Pending("ErrImagePull".into());
        assert_eq!(
            verdict(&Ended::Connected, &Ended::Refused),
            Verdict::Enforced
        );
        assert!(matches!(
            verdict(&Ended::Connected, &Ended::Connected),
            Verdict::Failed(_)
        ));
        assert!(matches!(
            verdict(&pending(), &Ended::Connected),
            Verdict::Failed(_)
        ));
        assert!(matches!(
            verdict(&Ended::Refused, &Ended::Refused),
            Verdict::Inconclusive(_)
        ));
        match verdict(&pending(), &Ended::Refused) {
            Verdict::Inconclusive(why) => assert!(why.contains("ErrImagePull"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            verdict(&Ended::Connected, &pending()),
            Verdict::Inconclusive(_)
        ));
    }

    #[test]
    fn a_pod_ends_as_its_phase_says() {
        let pod = |phase: &str| -> Pod {
            serde_json::from_value(serde_json::json!({"status": {"phase": phase}})).unwrap()
        };
        assert_eq!(ended(&pod("Succeeded")), Ended::Connected);
        assert_eq!(ended(&pod("Failed")), Ended::Refused);
        assert_eq!(
            ended(&pod("Running")),
            Ended::Pending("phase Running".into())
        );
        let waiting: Pod = serde_json::from_value(serde_json::json!({"status": {"phase": "Pending",
            "containerStatuses": [{"name": "probe", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}))
        .unwrap();
        assert_eq!(ended(&waiting), Ended::Pending("ImagePullBackOff".into()));
    }

    #[test]
    fn the_pods_are_restricted_and_short_lived() {
        let p = client(
            "b",
            STRANGER,
            "busybox:1.36",
            "10.244.0.9",
            Duration::from_secs(60),
        );
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["spec"]["restartPolicy"], "Never");
        assert_eq!(v["spec"]["automountServiceAccountToken"], false);
        assert_eq!(v["spec"]["activeDeadlineSeconds"], 60);
        assert_eq!(v["spec"]["securityContext"]["runAsNonRoot"], true);
        let c = &v["spec"]["containers"][0];
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(
            c["command"].as_array().unwrap().last().unwrap(),
            "http://10.244.0.9:8080/"
        );
        assert_eq!(v["metadata"]["labels"][PROBE_LABEL], "client");
    }
}
