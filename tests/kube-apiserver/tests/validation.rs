//! Objects a real API server refuses are refused here, with its `Status`
//! shape (422 `Invalid`, one `details.causes[]` entry per field): CEL
//! rules at every schema level, CRDs whose rules or patterns the server
//! could not enforce, the built-in kinds' own rules, and the test helpers'
//! fixtures, which go through the same validation.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use kube_test_server::{ApiError, GroupResource, Kind, KubeApiServer};
use serde_json::{json, Value};

/// A CRD whose rules sit on the object, a map-list's items and a map's
/// values.
const WIDGETS: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-validations:
            - {rule: "self.min <= self.max", message: "min must not exceed max", fieldPath: ".min"}
            properties:
              min: {type: integer}
              max: {type: integer}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port:
                      type: integer
                      x-kubernetes-validations:
                      - {rule: "self > 0 && self < 65536", message: "must be a port number"}
                      - {rule: "self == oldSelf", message: "port is immutable"}
"#;

fn widget(min: i64, max: i64, port: i64) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget",
           "metadata": {"name": "w", "namespace": "default"},
           "spec": {"min": min, "max": max, "ports": [{"name": "http", "port": port}]}})
}

/// The `Status` body the server answers with.
fn status(e: &ApiError) -> Value {
    e.to_status()
}

fn widgets() -> GroupResource {
    GroupResource::new("example.com", "widgets")
}

#[tokio::test]
async fn cel_rules_on_objects_and_list_items_refuse_with_the_real_status() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    kube.register_crd_yaml(WIDGETS).unwrap();
    let e = kube.create(widgets(), widget(1, 2, 0)).unwrap_err();
    assert_eq!(
        status(&e),
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Widget.example.com \"w\" is invalid: spec.ports[0].port: Invalid value: 0: must be a port number",
               "reason": "Invalid", "code": 422,
               "details": {"name": "w", "group": "example.com", "kind": "Widget",
                           "causes": [{"reason": "FieldValueInvalid", "field": "spec.ports[0].port",
                                       "message": "Invalid value: 0: must be a port number"}]}})
    );
    let e = kube.create(widgets(), widget(3, 2, 80)).unwrap_err();
    assert_eq!(
        status(&e)["details"]["causes"],
        json!([{"reason": "FieldValueInvalid", "field": "spec.min",
                "message": "Invalid value: min must not exceed max"}])
    );
    // A transition rule runs on update, for the item with the same key.
    let created = kube.create(widgets(), widget(1, 2, 80)).unwrap();
    let mut changed = created.clone();
    changed["spec"]["ports"][0]["port"] = json!(81);
    let e = kube.replace(widgets(), changed, false).unwrap_err();
    assert_eq!(e.code, 422);
    assert_eq!(
        status(&e)["details"]["causes"][0]["message"],
        "Invalid value: 81: port is immutable"
    );
    // Renamed, it is another item: nothing to compare with.
    let mut renamed = created.clone();
    renamed["spec"]["ports"][0] = json!({"name": "web", "port": 81});
    kube.replace(widgets(), renamed, false).unwrap();
}

#[tokio::test]
async fn a_crd_with_a_rule_or_pattern_this_server_cannot_enforce_is_not_registered() {
    let kube = KubeApiServer::start_without_crds().await.unwrap();
    let unsupported = WIDGETS.replace("self.min <= self.max", "self.min.isSorted()");
    let e = kube.register_crd_yaml(&unsupported).unwrap_err();
    let text = format!("{e:#}");
    assert!(
        text.contains("spec: x-kubernetes-validations rule \"self.min.isSorted()\": function 'isSorted' is not evaluated by this server"),
        "{text}"
    );
    let pattern = WIDGETS.replace(
        "name: {type: string}",
        "name: {type: string, pattern: \"a(\"}",
    );
    let e = kube.register_crd_yaml(&pattern).unwrap_err();
    assert!(
        format!("{e:#}").contains("pattern \"a(\" does not compile"),
        "{e:#}"
    );
    assert!(kube.objects(widgets()).is_empty() && kube.register_crd_yaml(WIDGETS).is_ok());
}

#[tokio::test]
async fn built_in_kinds_are_validated_by_their_own_rules() {
    let kube = KubeApiServer::start().await.unwrap();
    let e = kube
        .create(
            Kind::Secret,
            json!({"metadata": {"name": "s", "namespace": "default"},
            "type": "kubernetes.io/tls", "data": {"tls.crt": "YQ=="}}),
        )
        .unwrap_err();
    assert_eq!(
        status(&e)["details"]["causes"],
        json!([{"reason": "FieldValueRequired", "field": "data[tls.key]", "message": "Required value"}])
    );
    let e = kube
        .create(
            Kind::Secret,
            json!({"metadata": {"name": "s", "namespace": "default"},
            "data": {"a": "%%%"}}),
        )
        .unwrap_err();
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    let e = kube
        .create(
            Kind::Lease,
            json!({"metadata": {"name": "l", "namespace": "default"},
            "spec": {"leaseDurationSeconds": 0}}),
        )
        .unwrap_err();
    assert_eq!(
        e.message,
        "Lease.coordination.k8s.io \"l\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
    );
    let e = kube
        .create(Kind::Namespace, json!({"metadata": {"name": "a.b"}}))
        .unwrap_err();
    assert_eq!(status(&e)["details"]["causes"][0]["field"], "metadata.name");
    let bindings = GroupResource::new("rbac.authorization.k8s.io", "rolebindings");
    let e = kube
        .create(
            bindings,
            json!({"metadata": {"name": "system:b", "namespace": "default"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Pod", "name": "r"}}),
        )
        .unwrap_err();
    assert_eq!(
        status(&e)["details"]["causes"],
        json!([{"reason": "FieldValueNotSupported", "field": "roleRef.kind",
                "message": "Unsupported value: \"Pod\": supported values: \"Role\", \"ClusterRole\""}])
    );
}

#[tokio::test]
#[should_panic(expected = "kube.apply: a real API server refuses this object")]
async fn fixtures_applied_by_tests_are_validated_too() {
    let kube = KubeApiServer::start().await.unwrap();
    kube.apply(
        Kind::Lease,
        json!({"metadata": {"name": "l", "namespace": "default"}, "spec": {"leaseDurationSeconds": -1}}),
    );
}
