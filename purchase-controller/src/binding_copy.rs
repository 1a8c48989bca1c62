//! Binding copies, the pure half: which Secrets are binding sources, what
//! their copy is, and what to do about each — the effects are the
//! copier's (`binding_copier`, which imports this module).
//!
//! A service provider's controller writes a binding's credentials as a
//! Secret in the instance namespace it offloads to the customer; Liqo's
//! virtual kubelet reflects it into the customer's remote namespace. On the
//! customer's cluster, a *source* is such a reflected Secret: it carries
//! [`BINDING`] (the binding id) and the annotations [`TARGET_NAMESPACE`]
//! and [`TARGET_NAME`], Liqo's reflection labels naming this cluster as
//! the destination (`pkg/virtualKubelet/forge/meta.go:28-41`), and lives in
//! a namespace Liqo's namespace map made for that origin
//! (`liqo.io/remote-cluster-id=<origin>`, annotated
//! `liqo.io/managed-by-namespace-map`:
//! `pkg/liqo-controller-manager/offloading/namespacemap-controller/enforcement.go:55-66`).
//! Anything else with the label — the provider's own Secret on its
//! cluster, say — is not a source and is left alone without a word.
//!
//! A source is copied into its target only when the target namespace
//! carries [`ACCEPT_BINDINGS`]`: "true"` (a provider must not write
//! Secrets wherever it likes), its [`ACCEPT_FROM`] annotation names the
//! source's origin (one provider must not write another's Secrets: BC-04)
//! and leaves it the target name, the source is `Opaque` or of a type
//! [`ACCEPT_TYPES`] names (image-pull credentials are not a binding:
//! BC-08), and the target Secret is absent or a copy of that same source;
//! the copy follows the source's data and type, and goes when the source
//! goes, or stops being copyable.

use std::collections::BTreeMap;

use catalog_client::wire::names::{is_dns_label, is_dns_subdomain};
use controller_core::liqo::REMOTE_CLUSTER_ID_LABEL;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::ObjectMeta;

use crate::liqo::{MANAGED_BY, MANAGER};

/// On a source: the binding's id.
pub const BINDING: &str = "broker.liqo-broker.io/binding";
/// On a source: where the customer wants the copy.
pub const TARGET_NAMESPACE: &str = "broker.liqo-broker.io/target-namespace";
pub const TARGET_NAME: &str = "broker.liqo-broker.io/target-name";
/// On a namespace (label): copies may be written here.
pub const ACCEPT_BINDINGS: &str = "broker.liqo-broker.io/accept-bindings";
/// On a namespace (annotation): whose copies, a list (commas or blanks)
/// of `<provider cluster ID>` (any Secret name that no other entry
/// reserves) and `<provider cluster ID>/<Secret name>` (that name, for
/// that provider only).
pub const ACCEPT_FROM: &str = "broker.liqo-broker.io/accept-bindings-from";
/// On a namespace (annotation): Secret types copied besides `Opaque`, a
/// list (commas or blanks).
pub const ACCEPT_TYPES: &str = "broker.liqo-broker.io/accept-binding-types";
/// Never copied, whatever a namespace says: the token controller fills
/// such a Secret with a token of a ServiceAccount of the target namespace
/// (Kubernetes `pkg/controller/serviceaccount/tokens_controller.go`), an
/// identity no provider is to be handed.
const SERVICE_ACCOUNT_TOKEN: &str = "kubernetes.io/service-account-token";
/// On a copy: the binding's id (a source's label is not copied, so a copy
/// is never taken for a source).
pub const COPY_OF: &str = "broker.liqo-broker.io/binding-copy";
/// On a copy: its source, `namespace/name`.
pub const SOURCE: &str = "broker.liqo-broker.io/binding-source";

/// Liqo's reflection labels (`pkg/virtualKubelet/forge/meta.go:28-30`):
/// the cluster the object comes from and the one it was reflected to.
const ORIGIN: &str = "offloading.liqo.io/origin";
const DESTINATION: &str = "offloading.liqo.io/destination";
/// `pkg/consts/namespace_mapping.go`: on a namespace Liqo made for a peer.
const MANAGED_BY_NAMESPACE_MAP: &str = "liqo.io/managed-by-namespace-map";

/// Where a source asks to be copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub binding: String,
    /// The provider's cluster (Liqo's origin label).
    pub origin: String,
    pub namespace: String,
    pub name: String,
}

/// Why a Secret with the binding label is not a source, or why a source
/// cannot be copied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotCopied {
    /// Not reflected to this cluster by Liqo: not a source at all.
    NotASource(String),
    /// A source whose copy is refused: said on the source (an Event) and
    /// in the log, nothing written.
    Refused(String),
}

/// What to do for one source.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    Create(Secret),
    /// Replace the copy (it carries the existing copy's resourceVersion).
    Update(Secret),
    /// Delete the copy and create it again: a Secret's `type` cannot
    /// change (`ValidateSecretUpdate`, Kubernetes
    /// `pkg/apis/core/validation/validation.go`).
    Recreate(Secret),
    Keep,
}

/// `namespace/name` of an object.
pub fn key(meta: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default()
    )
}

fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn annotation<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Whether `secret` (in `namespace`, as read) is a source reflected to
/// `cluster_id`, and where it asks to go.
pub fn source(
    secret: &Secret,
    namespace: Option<&Namespace>,
    cluster_id: &str,
) -> Result<Target, NotCopied> {
    let meta = &secret.metadata;
    let not_a_source = |why: &str| Err(NotCopied::NotASource(why.to_string()));
    let Some(binding) = label(meta, BINDING) else {
        return not_a_source("no binding label");
    };
    let (Some(origin), Some(destination)) = (label(meta, ORIGIN), label(meta, DESTINATION)) else {
        return not_a_source("not reflected by Liqo");
    };
    if destination != cluster_id {
        return not_a_source("reflected to another cluster");
    }
    let remote_namespace = namespace.is_some_and(|ns| {
        label(&ns.metadata, REMOTE_CLUSTER_ID_LABEL) == Some(origin)
            && annotation(&ns.metadata, MANAGED_BY_NAMESPACE_MAP).is_some()
    });
    if !remote_namespace {
        return not_a_source("not in a namespace Liqo offloaded here from its origin");
    }
    let refused = |why: String| Err(NotCopied::Refused(why));
    let target_namespace = annotation(meta, TARGET_NAMESPACE).unwrap_or_default();
    let target_name = annotation(meta, TARGET_NAME).unwrap_or_default();
    if !is_dns_label(target_namespace) {
        return refused(format!(
            "annotation {TARGET_NAMESPACE} {target_namespace:?} is not a namespace name"
        ));
    }
    if !is_dns_subdomain(target_name) {
        return refused(format!(
            "annotation {TARGET_NAME} {target_name:?} is not a Secret name"
        ));
    }
    Ok(Target {
        binding: binding.to_string(),
        origin: origin.to_string(),
        namespace: target_namespace.to_string(),
        name: target_name.to_string(),
    })
}

/// The copy of `source` at `target`: its type and data, the controller's
/// marks, nothing else of the source's (Liqo's reflection labels would
/// make the copy look reflected).
pub fn copy(source: &Secret, target: &Target) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(target.name.clone()),
            namespace: Some(target.namespace.clone()),
            labels: Some(BTreeMap::from([
                (MANAGED_BY.to_string(), MANAGER.to_string()),
                (COPY_OF.to_string(), target.binding.clone()),
            ])),
            annotations: Some(BTreeMap::from([(
                SOURCE.to_string(),
                key(&source.metadata),
            )])),
            ..ObjectMeta::default()
        },
        type_: source.type_.clone(),
        data: source.data.clone(),
        ..Secret::default()
    }
}

/// The entries of a list annotation: commas or blanks between them.
fn list<'a>(meta: &'a ObjectMeta, key: &str) -> impl Iterator<Item = &'a str> {
    annotation(meta, key)
        .unwrap_or_default()
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|entry| !entry.is_empty())
}

/// Whether the namespace takes `target`'s provider writing `target.name`:
/// listed for that name, or listed bare and the name reserved for no other
/// provider.
fn accepted_from(namespace: &Namespace, target: &Target) -> Result<(), String> {
    let entries: Vec<(&str, Option<&str>)> = list(&namespace.metadata, ACCEPT_FROM)
        .map(|entry| match entry.split_once('/') {
            Some((origin, name)) => (origin, Some(name)),
            None => (entry, None),
        })
        .collect();
    let ns = &target.namespace;
    if entries.is_empty() {
        return Err(format!(
            "namespace {ns} names no provider it accepts bindings from (annotate it {ACCEPT_FROM}=<provider cluster ID>[/<Secret name>],…)"
        ));
    }
    let origin = target.origin.as_str();
    let name = Some(target.name.as_str());
    if entries.contains(&(origin, name)) {
        return Ok(());
    }
    if let Some((owner, _)) = entries.iter().find(|(o, n)| *n == name && *o != origin) {
        return Err(format!(
            "Secret name {ns}/{} is reserved for the bindings of provider {owner} ({ACCEPT_FROM}), not of {origin}",
            target.name
        ));
    }
    if entries.contains(&(origin, None)) {
        return Ok(());
    }
    Err(format!(
        "namespace {ns} does not accept bindings from provider {origin} as {} ({ACCEPT_FROM} does not name it)",
        target.name
    ))
}

/// Whether the source's type may be written in the namespace: `Opaque`
/// (absent or empty is `Opaque`, Kubernetes `SetDefaults_Secret`), or a
/// type the namespace lists; never a service-account token.
fn accepted_type(source: &Secret, namespace: &Namespace, target: &Target) -> Result<(), String> {
    let type_ = source.type_.as_deref().unwrap_or_default();
    if type_.is_empty() || type_ == "Opaque" {
        return Ok(());
    }
    let ns = &target.namespace;
    if type_ == SERVICE_ACCOUNT_TOKEN {
        return Err(format!(
            "a Secret of type {type_} is never copied (it would be handed a ServiceAccount's token in {ns})"
        ));
    }
    if list(&namespace.metadata, ACCEPT_TYPES).any(|t| t == type_) {
        return Ok(());
    }
    Err(format!(
        "namespace {ns} accepts binding Secrets of type Opaque only, not {type_} (annotate it {ACCEPT_TYPES}={type_} to accept it)"
    ))
}

/// Whether `secret` is a copy this controller made, and of which source.
pub fn copy_source(secret: &Secret) -> Option<&str> {
    let meta = &secret.metadata;
    (label(meta, MANAGED_BY) == Some(MANAGER) && label(meta, COPY_OF).is_some())
        .then(|| annotation(meta, SOURCE))
        .flatten()
}

/// What to do for `source` going to `target`, given the target namespace
/// and the Secret there, as read.
pub fn plan(
    source: &Secret,
    target: &Target,
    namespace: Option<&Namespace>,
    existing: Option<&Secret>,
) -> Result<Plan, NotCopied> {
    let refused = |why: String| Err(NotCopied::Refused(why));
    let Some(namespace) = namespace else {
        return refused(format!("namespace {} does not exist", target.namespace));
    };
    if label(&namespace.metadata, ACCEPT_BINDINGS) != Some("true") {
        return refused(format!(
            "namespace {} does not accept bindings (label it {ACCEPT_BINDINGS}=true)",
            target.namespace
        ));
    }
    accepted_from(namespace, target).map_err(NotCopied::Refused)?;
    accepted_type(source, namespace, target).map_err(NotCopied::Refused)?;
    let wanted = copy(source, target);
    let Some(existing) = existing else {
        return Ok(Plan::Create(wanted));
    };
    let me = key(&source.metadata);
    match copy_source(existing) {
        Some(of) if of == me => {}
        Some(other) => {
            return refused(format!(
                "Secret {}/{} is the copy of another binding source, {other}",
                target.namespace, target.name
            ))
        }
        None => {
            return refused(format!(
                "Secret {}/{} exists and was not made by the controller: it is never overwritten",
                target.namespace, target.name
            ))
        }
    }
    if existing.type_ != wanted.type_ {
        return Ok(Plan::Recreate(wanted));
    }
    let same = existing.data.clone().unwrap_or_default() == wanted.data.clone().unwrap_or_default()
        && label(&existing.metadata, COPY_OF) == Some(target.binding.as_str());
    if same {
        return Ok(Plan::Keep);
    }
    let mut update = wanted;
    update.metadata.resource_version = existing.metadata.resource_version.clone();
    Ok(Plan::Update(update))
}

/// The copies to delete: those whose source is not among `kept` (the
/// `namespace/name` of the sources copied this round, each with the
/// target it was copied to).
pub fn orphans<'a>(copies: &'a [Secret], kept: &BTreeMap<String, Target>) -> Vec<&'a Secret> {
    copies
        .iter()
        .filter(|copy| {
            let Some(source) = copy_source(copy) else {
                return false;
            };
            let here = (
                copy.metadata.namespace.as_deref(),
                copy.metadata.name.as_deref(),
            );
            kept.get(source)
                .is_none_or(|t| here != (Some(t.namespace.as_str()), Some(t.name.as_str())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;

    fn meta(labels: &[(&str, &str)], annotations: &[(&str, &str)]) -> ObjectMeta {
        let map = |pairs: &[(&str, &str)]| {
            Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            )
        };
        ObjectMeta {
            labels: map(labels),
            annotations: map(annotations),
            ..ObjectMeta::default()
        }
    }

    fn reflected(data: &str) -> Secret {
        let mut m = meta(
            &[(BINDING, "b-1"), (ORIGIN, "sp"), (DESTINATION, "me")],
            &[(TARGET_NAMESPACE, "app"), (TARGET_NAME, "db-creds")],
        );
        m.name = Some("binding-b-1".into());
        m.namespace = Some("inst-sp".into());
        Secret {
            metadata: m,
            data: Some([("password".to_string(), ByteString(data.into()))].into()),
            ..Secret::default()
        }
    }

    fn remote_namespace(origin: &str) -> Namespace {
        Namespace {
            metadata: meta(
                &[(REMOTE_CLUSTER_ID_LABEL, origin)],
                &[(MANAGED_BY_NAMESPACE_MAP, "liqo-tenant-sp/sp")],
            ),
            ..Namespace::default()
        }
    }

    /// A namespace labelled `value`, accepting bindings from `sp`.
    fn accepting(value: &str) -> Namespace {
        accepting_from(value, "sp", "")
    }

    fn accepting_from(value: &str, from: &str, types: &str) -> Namespace {
        Namespace {
            metadata: meta(
                &[(ACCEPT_BINDINGS, value)],
                &[(ACCEPT_FROM, from), (ACCEPT_TYPES, types)],
            ),
            ..Namespace::default()
        }
    }

    #[test]
    fn only_secrets_liqo_reflected_here_into_a_remote_namespace_are_sources() {
        let s = reflected("x");
        let target = source(&s, Some(&remote_namespace("sp")), "me").unwrap();
        assert_eq!(
            target,
            Target {
                binding: "b-1".into(),
                origin: "sp".into(),
                namespace: "app".into(),
                name: "db-creds".into()
            }
        );
        let not = |r: Result<Target, NotCopied>| matches!(r, Err(NotCopied::NotASource(_)));
        assert!(not(source(&s, Some(&remote_namespace("sp")), "other")));
        assert!(not(source(&s, Some(&remote_namespace("elsewhere")), "me")));
        assert!(not(source(&s, Some(&accepting("true")), "me")));
        assert!(not(source(&s, None, "me")));
        let mut local = s.clone();
        local.metadata.labels.as_mut().unwrap().remove(ORIGIN);
        assert!(not(source(&local, Some(&remote_namespace("sp")), "me")));
        let mut bad = s.clone();
        bad.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(TARGET_NAMESPACE.into(), "Not_A_Namespace".into());
        assert!(matches!(
            source(&bad, Some(&remote_namespace("sp")), "me"),
            Err(NotCopied::Refused(m)) if m.contains(TARGET_NAMESPACE)
        ));
    }

    #[test]
    fn a_copy_goes_only_where_accepted_and_never_over_a_foreign_secret() {
        let s = reflected("x");
        let t = source(&s, Some(&remote_namespace("sp")), "me").unwrap();
        let Ok(Plan::Create(copy)) = plan(&s, &t, Some(&accepting("true")), None) else {
            panic!("no copy planned")
        };
        assert_eq!(copy.data, s.data);
        assert_eq!(copy_source(&copy), Some("inst-sp/binding-b-1"));
        assert!(copy.metadata.labels.as_ref().unwrap().get(ORIGIN).is_none());
        assert!(copy
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .get(BINDING)
            .is_none());

        for ns in [None, Some(accepting("false")), Some(Namespace::default())] {
            assert!(matches!(
                plan(&s, &t, ns.as_ref(), None),
                Err(NotCopied::Refused(_))
            ));
        }
        let foreign = Secret::default();
        assert!(matches!(
            plan(&s, &t, Some(&accepting("true")), Some(&foreign)),
            Err(NotCopied::Refused(m)) if m.contains("never overwritten")
        ));
        let mut of_another = copy.clone();
        of_another
            .metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(SOURCE.into(), "x/y".into());
        assert!(matches!(
            plan(&s, &t, Some(&accepting("true")), Some(&of_another)),
            Err(NotCopied::Refused(m)) if m.contains("x/y")
        ));
    }

    #[test]
    fn a_copy_follows_its_source_and_goes_with_it() {
        let s = reflected("x");
        let t = source(&s, Some(&remote_namespace("sp")), "me").unwrap();
        let mut have = copy(&s, &t);
        have.metadata.resource_version = Some("7".into());
        let ns = accepting("true");
        assert_eq!(plan(&s, &t, Some(&ns), Some(&have)), Ok(Plan::Keep));
        let changed = reflected("y");
        let Ok(Plan::Update(update)) = plan(&changed, &t, Some(&ns), Some(&have)) else {
            panic!("no update planned")
        };
        assert_eq!(update.data, changed.data);
        assert_eq!(update.metadata.resource_version.as_deref(), Some("7"));
        let mut retyped = reflected("x");
        retyped.type_ = Some("kubernetes.io/basic-auth".into());
        let typed = accepting_from("true", "sp", "kubernetes.io/basic-auth");
        assert!(matches!(
            plan(&retyped, &t, Some(&typed), Some(&have)),
            Ok(Plan::Recreate(s)) if s.type_ == retyped.type_
        ));

        let copies = vec![have.clone()];
        let kept = BTreeMap::from([("inst-sp/binding-b-1".to_string(), t.clone())]);
        assert!(orphans(&copies, &kept).is_empty());
        assert_eq!(orphans(&copies, &BTreeMap::new()).len(), 1);
        let moved = Target {
            name: "elsewhere".into(),
            ..t
        };
        let kept = BTreeMap::from([("inst-sp/binding-b-1".to_string(), moved)]);
        assert_eq!(orphans(&copies, &kept).len(), 1);
        assert!(orphans(&[Secret::default()], &BTreeMap::new()).is_empty());
    }

    /// BC-04: a second provider's source aimed at the name the customer
    /// gave the first one's binding is refused, whether that provider is
    /// not named at all or named for other Secrets only; the label alone
    /// (the opt-in before issue 41) names no provider.
    #[test]
    fn only_named_providers_write_and_a_reserved_name_is_its_providers() {
        let good = reflected("x");
        let t = source(&good, Some(&remote_namespace("sp")), "me").unwrap();
        let mut evil = reflected("db://attacker.example");
        evil.metadata.namespace = Some("inst-evil".into());
        let labels = evil.metadata.labels.as_mut().unwrap();
        labels.insert(ORIGIN.into(), "evil".into());
        let e = source(&evil, Some(&remote_namespace("evil")), "me").unwrap();
        assert_eq!((e.origin.as_str(), e.name.as_str()), ("evil", "db-creds"));
        let refused = |s: &Secret, t: &Target, ns: &Namespace, says: &str| {
            assert!(
                matches!(plan(s, t, Some(ns), None), Err(NotCopied::Refused(m)) if m.contains(says)),
                "{:?} {says}",
                plan(s, t, Some(ns), None)
            )
        };
        let creates = |s: &Secret, t: &Target, ns: &Namespace| {
            assert!(matches!(plan(s, t, Some(ns), None), Ok(Plan::Create(_))))
        };
        let legacy = Namespace {
            metadata: meta(&[(ACCEPT_BINDINGS, "true")], &[]),
            ..Namespace::default()
        };
        refused(&good, &t, &legacy, "names no provider");
        refused(
            &good,
            &t,
            &accepting_from("true", " , ", ""),
            "names no provider",
        );

        let only_sp = accepting_from("true", "sp", "");
        creates(&good, &t, &only_sp);
        refused(&evil, &e, &only_sp, "from provider evil");

        // Both named, the name pinned to sp: evil may write other names.
        let pinned = accepting_from("true", "evil, sp/db-creds", "");
        creates(&good, &t, &pinned);
        refused(
            &evil,
            &e,
            &pinned,
            "reserved for the bindings of provider sp",
        );
        let other_name = Target {
            name: "cache".into(),
            ..e.clone()
        };
        creates(&evil, &other_name, &pinned);
        // A provider named for one Secret only writes that one.
        let one = accepting_from("true", "sp/db-creds", "");
        let elsewhere = Target {
            name: "other".into(),
            ..t.clone()
        };
        refused(&good, &elsewhere, &one, "from provider sp");
        // Listed for the name and bare for another provider: the name wins.
        creates(&good, &t, &accepting_from("true", "sp/db-creds\nevil", ""));
    }

    /// BC-08 (and BC-07): only Opaque Secrets are copied unless the
    /// namespace names the type; a service-account token never is.
    #[test]
    fn only_opaque_unless_the_namespace_names_the_type() {
        let mut s = reflected("x");
        let t = source(&s, Some(&remote_namespace("sp")), "me").unwrap();
        for opaque in [None, Some(""), Some("Opaque")] {
            s.type_ = opaque.map(str::to_string);
            assert!(matches!(
                plan(&s, &t, Some(&accepting("true")), None),
                Ok(Plan::Create(_))
            ));
        }
        let pull = "kubernetes.io/dockerconfigjson";
        s.type_ = Some(pull.into());
        assert!(matches!(
            plan(&s, &t, Some(&accepting("true")), None),
            Err(NotCopied::Refused(m)) if m.contains("Opaque only") && m.contains(pull)
        ));
        let typed = accepting_from(
            "true",
            "sp",
            "kubernetes.io/basic-auth, kubernetes.io/dockerconfigjson",
        );
        assert!(matches!(
            plan(&s, &t, Some(&typed), None),
            Ok(Plan::Create(c)) if c.type_.as_deref() == Some(pull)
        ));
        let token = "kubernetes.io/service-account-token";
        s.type_ = Some(token.into());
        let everything = accepting_from("true", "sp", token);
        assert!(matches!(
            plan(&s, &t, Some(&everything), None),
            Err(NotCopied::Refused(m)) if m.contains("never copied")
        ));
    }
}
