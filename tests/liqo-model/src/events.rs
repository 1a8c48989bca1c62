//! The Events Liqo's controllers record (client-go's `record.EventRecorder`,
//! from `mgr.GetEventRecorderFor(<controller>)`): a core/v1 Event on the
//! object, in its namespace, with the reason a person or a test reads to
//! learn why a controller stopped. The recorder's aggregation of repeated
//! events into a count is not modelled: each call is one Event.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DynamicObject, PostParams};
use kube::{Client, Resource, ResourceExt};

/// `Warning` or `Normal`, as client-go's `corev1.EventType*`.
pub const WARNING: &str = "Warning";
pub const NORMAL: &str = "Normal";

/// The reference to `obj` an Event carries.
pub fn reference_to<K: Resource<DynamicType = ()>>(obj: &K) -> ObjectReference {
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: obj.meta().name.clone(),
        namespace: obj.meta().namespace.clone(),
        uid: obj.meta().uid.clone(),
        resource_version: obj.meta().resource_version.clone(),
        ..Default::default()
    }
}

/// [`reference_to`] for an object of a custom resource.
pub fn reference_to_dynamic(obj: &DynamicObject) -> ObjectReference {
    let types = obj.types.clone().unwrap_or_default();
    ObjectReference {
        api_version: Some(types.api_version),
        kind: Some(types.kind),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.meta().uid.clone(),
        resource_version: obj.resource_version(),
        ..Default::default()
    }
}

/// Record an Event of `kind` with `reason` and `message` on `involved`
/// from `component`. A failure is logged and dropped, as client-go's
/// recorder drops events it cannot send.
pub async fn record(
    client: &Client,
    involved: ObjectReference,
    component: &str,
    kind: &str,
    reason: &str,
    message: &str,
) {
    let namespace = involved
        .namespace
        .clone()
        .unwrap_or_else(|| "default".to_string());
    let name = involved.name.clone().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut event = Event {
        involved_object: involved,
        reason: Some(reason.to_string()),
        message: Some(message.to_string()),
        type_: Some(kind.to_string()),
        source: Some(EventSource {
            component: Some(component.to_string()),
            ..Default::default()
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        count: Some(1),
        ..Default::default()
    };
    // client-go names an event `<object>.<unix nanoseconds in hex>`.
    let nanos = now.as_nanosecond();
    event.metadata.name = Some(format!("{name}.{nanos:x}"));
    event.metadata.namespace = Some(namespace.clone());
    let events: Api<Event> = Api::namespaced(client.clone(), &namespace);
    if let Err(e) = events.create(&PostParams::default(), &event).await {
        tracing::warn!(error = %e, reason, "recording an event");
    }
}
