//! Request bodies in Kubernetes' protobuf encoding, which client-go's
//! typed clients send for built-in kinds (kubectl's `create namespace`,
//! Helm's release storage in Secrets: `Content-Type:
//! application/vnd.kubernetes.protobuf`), read into the JSON the rest of
//! the server handles. Answers stay JSON, which those clients accept
//! (`Accept: application/vnd.kubernetes.protobuf,application/json`).
//!
//! The envelope is `staging/src/k8s.io/apimachinery/pkg/runtime/serializer/protobuf/protobuf.go`'s:
//! the magic `k8s\0`, then a `runtime.Unknown`
//! (`apimachinery/pkg/runtime/generated.proto`: `typeMeta` 1, `raw` 2,
//! `contentEncoding` 3, `contentType` 4) whose `raw` is the object's own
//! message. The messages read are those of
//! `staging/src/k8s.io/api/core/v1/generated.proto` (Secret, ConfigMap,
//! Namespace) and `apimachinery/pkg/apis/meta/v1/generated.proto`
//! (ObjectMeta, OwnerReference, DeleteOptions), with the fields a client
//! writes; the server-set ones (`creationTimestamp`, `managedFields`…)
//! are not read. Any other kind is the real server's 415 for a body it
//! cannot decode (`staging/src/k8s.io/apiserver/pkg/endpoints/handlers/rest.go`,
//! `negotiation.NewUnsupportedMediaTypeError`).

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::http::HeaderMap;
use base64::Engine;
use prost::Message;
use serde_json::{json, Map, Value};

use crate::status::ApiError;

/// The content type of the protobuf encoding.
pub const CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// protobuf.go's `protoEncodingPrefix`.
const MAGIC: &[u8] = b"k8s\x00";

#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
    #[prost(string, optional, tag = "4")]
    content_type: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct OwnerReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
    #[prost(string, optional, tag = "5")]
    api_version: Option<String>,
    #[prost(bool, optional, tag = "6")]
    controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    block_owner_deletion: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "2")]
    generate_name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
    #[prost(string, optional, tag = "5")]
    uid: Option<String>,
    #[prost(string, optional, tag = "6")]
    resource_version: Option<String>,
    #[prost(btree_map = "string, string", tag = "11")]
    labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Secret {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    data: BTreeMap<String, Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    r#type: Option<String>,
    #[prost(btree_map = "string, string", tag = "4")]
    string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    binary_data: BTreeMap<String, Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    immutable: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct NamespaceSpec {
    #[prost(string, repeated, tag = "1")]
    finalizers: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct Namespace {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<NamespaceSpec>,
}

#[derive(Clone, PartialEq, Message)]
struct Preconditions {
    #[prost(string, optional, tag = "1")]
    uid: Option<String>,
    #[prost(string, optional, tag = "2")]
    resource_version: Option<String>,
}

#[derive(Clone, PartialEq, Message)]
struct DeleteOptions {
    #[prost(int64, optional, tag = "1")]
    grace_period_seconds: Option<i64>,
    #[prost(message, optional, tag = "2")]
    preconditions: Option<Preconditions>,
    #[prost(bool, optional, tag = "3")]
    orphan_dependents: Option<bool>,
    #[prost(string, optional, tag = "4")]
    propagation_policy: Option<String>,
    #[prost(string, repeated, tag = "5")]
    dry_run: Vec<String>,
}

/// `object[key] = value` unless `value` is empty, as Go's `omitempty`.
fn put(object: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if !empty {
        object.insert(key.to_string(), value);
    }
}

fn b64_map(map: &BTreeMap<String, Vec<u8>>) -> Value {
    let engine = base64::engine::general_purpose::STANDARD;
    map.iter()
        .map(|(k, v)| (k.clone(), json!(engine.encode(v))))
        .collect::<Map<String, Value>>()
        .into()
}

fn metadata(meta: Option<ObjectMeta>) -> Value {
    let meta = meta.unwrap_or_default();
    let mut out = Map::new();
    put(&mut out, "name", json!(meta.name));
    put(&mut out, "generateName", json!(meta.generate_name));
    put(&mut out, "namespace", json!(meta.namespace));
    put(&mut out, "uid", json!(meta.uid));
    put(&mut out, "resourceVersion", json!(meta.resource_version));
    put(&mut out, "labels", json!(meta.labels));
    put(&mut out, "annotations", json!(meta.annotations));
    let owners: Vec<Value> = meta
        .owner_references
        .into_iter()
        .map(|o| {
            let mut r = Map::new();
            put(&mut r, "apiVersion", json!(o.api_version));
            put(&mut r, "kind", json!(o.kind));
            put(&mut r, "name", json!(o.name));
            put(&mut r, "uid", json!(o.uid));
            put(&mut r, "controller", json!(o.controller));
            put(&mut r, "blockOwnerDeletion", json!(o.block_owner_deletion));
            Value::Object(r)
        })
        .collect();
    put(&mut out, "ownerReferences", json!(owners));
    put(&mut out, "finalizers", json!(meta.finalizers));
    Value::Object(out)
}

fn unsupported(detail: &str) -> ApiError {
    ApiError::new(
        415,
        "UnsupportedMediaType",
        format!(
            "the body of the request was in an unknown format - accepted media types include: \
             application/json, application/yaml ({detail})"
        ),
    )
}

/// A protobuf-encoded object as the JSON object it stands for.
pub fn decode(body: &[u8]) -> Result<Value, ApiError> {
    let bad =
        |e: prost::DecodeError| ApiError::bad_request(format!("error decoding request body: {e}"));
    let message = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| unsupported("no k8s protobuf prefix"))?;
    let unknown = Unknown::decode(message).map_err(bad)?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let mut out = Map::new();
    out.insert("apiVersion".into(), json!(api_version));
    out.insert("kind".into(), json!(kind));
    match (api_version.as_str(), kind.as_str()) {
        ("v1", "Secret") => {
            let s = Secret::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), metadata(s.metadata));
            put(&mut out, "data", b64_map(&s.data));
            put(&mut out, "stringData", json!(s.string_data));
            put(&mut out, "type", json!(s.r#type));
            put(&mut out, "immutable", json!(s.immutable));
        }
        ("v1", "ConfigMap") => {
            let c = ConfigMap::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), metadata(c.metadata));
            put(&mut out, "data", json!(c.data));
            put(&mut out, "binaryData", b64_map(&c.binary_data));
            put(&mut out, "immutable", json!(c.immutable));
        }
        ("v1", "Namespace") => {
            let n = Namespace::decode(raw.as_slice()).map_err(bad)?;
            out.insert("metadata".into(), metadata(n.metadata));
            let finalizers = n.spec.map(|s| s.finalizers).unwrap_or_default();
            let mut spec = Map::new();
            put(&mut spec, "finalizers", json!(finalizers));
            put(&mut out, "spec", Value::Object(spec));
        }
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => {
            let d = DeleteOptions::decode(raw.as_slice()).map_err(bad)?;
            put(
                &mut out,
                "gracePeriodSeconds",
                json!(d.grace_period_seconds),
            );
            if let Some(p) = d.preconditions {
                let mut pre = Map::new();
                put(&mut pre, "uid", json!(p.uid));
                put(&mut pre, "resourceVersion", json!(p.resource_version));
                put(&mut out, "preconditions", Value::Object(pre));
            }
            put(&mut out, "orphanDependents", json!(d.orphan_dependents));
            put(&mut out, "propagationPolicy", json!(d.propagation_policy));
            put(&mut out, "dryRun", json!(d.dry_run));
        }
        _ => return Err(unsupported(&format!("{api_version} {kind}"))),
    }
    Ok(Value::Object(out))
}

/// The request body as JSON: a protobuf one decoded, any other as sent.
pub fn request_body(headers: &HeaderMap, body: Bytes) -> Result<Bytes, ApiError> {
    let protobuf = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim() == CONTENT_TYPE);
    if !protobuf || body.is_empty() {
        return Ok(body);
    }
    Ok(Bytes::from(decode(&body)?.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some(api_version.into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        let mut body = MAGIC.to_vec();
        body.extend(unknown.encode_to_vec());
        body
    }

    #[test]
    fn a_secret_reads_as_its_json() {
        let secret = Secret {
            metadata: Some(ObjectMeta {
                name: Some("sh.helm.release.v1.demo.v1".into()),
                namespace: Some("default".into()),
                labels: [("owner".to_string(), "helm".to_string())].into(),
                ..Default::default()
            }),
            data: [("release".to_string(), b"abc".to_vec())].into(),
            r#type: Some("helm.sh/release.v1".into()),
            ..Default::default()
        };
        let body = envelope("v1", "Secret", secret.encode_to_vec());
        assert_eq!(
            decode(&body).unwrap(),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "sh.helm.release.v1.demo.v1", "namespace": "default",
                                "labels": {"owner": "helm"}},
                   "data": {"release": "YWJj"}, "type": "helm.sh/release.v1"})
        );
    }

    #[test]
    fn other_kinds_and_bodies_are_refused_as_the_real_server_refuses_them() {
        let body = envelope("apps/v1", "Deployment", Vec::new());
        assert_eq!(decode(&body).unwrap_err().code, 415);
        assert_eq!(decode(b"{}").unwrap_err().code, 415);
        let mut headers = HeaderMap::new();
        headers.insert("content-type", "application/json".parse().unwrap());
        let json = Bytes::from_static(b"{\"a\":1}");
        assert_eq!(request_body(&headers, json.clone()).unwrap(), json);
    }
}
