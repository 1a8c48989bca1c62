//! Byte-level checks of the generated messages against the field numbers and
//! wire types Liqo uses. A renamed or renumbered field changes these bytes,
//! so it cannot slip through.

use std::collections::HashMap;

use prost::Message;

use crate::{k8s, shape_a, shape_b, shape_c};

/// A length-delimited field: `(tag << 3 | 2) len bytes...`.
fn ld(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut v = vec![(tag << 3) | 2, body.len() as u8];
    v.extend_from_slice(body);
    v
}

fn cat(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn shape_a_read_request_is_originator_field_1() {
    let bytes = shape_a::ReadRequest {
        originator: "c1".into(),
    }
    .encode_to_vec();
    assert_eq!(bytes, ld(1, b"c1"));
    let back = shape_a::ReadRequest::decode(&bytes[..]).unwrap();
    assert_eq!(back.originator, "c1");
}

#[test]
fn shape_a_read_response_is_string_map_field_1() {
    let resp = shape_a::ReadResponse {
        resources: HashMap::from([("cpu".to_string(), "1500m".to_string())]),
    };
    let entry = cat(&[ld(1, b"cpu"), ld(2, b"1500m")]);
    assert_eq!(resp.encode_to_vec(), ld(1, &entry));
    let back = shape_a::ReadResponse::decode(&ld(1, &entry)[..]).unwrap();
    assert_eq!(back.resources["cpu"], "1500m");
}

#[test]
fn shape_a_remove_request_and_empty_messages() {
    assert_eq!(
        shape_a::RemoveRequest {
            cluster: "x".into()
        }
        .encode_to_vec(),
        ld(1, b"x")
    );
    assert!(shape_a::RemoveResponse {}.encode_to_vec().is_empty());
    assert!(shape_a::SubscribeRequest {}.encode_to_vec().is_empty());
    assert!(shape_a::UpdateNotification {}.encode_to_vec().is_empty());
}

#[test]
fn k8s_quantity_is_optional_string_field_1() {
    let q = k8s::Quantity {
        string: Some("4Gi".into()),
    };
    assert_eq!(q.encode_to_vec(), ld(1, b"4Gi"));
    // proto2 `optional`: an absent field stays absent, it is not "".
    assert_eq!(k8s::Quantity::decode(&[][..]).unwrap().string, None);
}

#[test]
fn shape_b_cluster_identity_and_resource_list() {
    let id = shape_b::ClusterIdentity {
        cluster_id: "c2".into(),
    };
    assert_eq!(id.encode_to_vec(), ld(1, b"c2"));
    assert_eq!(
        shape_b::ClusterIdentity::decode(&ld(1, b"c2")[..])
            .unwrap()
            .cluster_id,
        "c2"
    );

    let entry = cat(&[ld(1, b"memory"), ld(2, &ld(1, b"2Gi"))]);
    let list = shape_b::ResourceList::decode(&ld(1, &entry)[..]).unwrap();
    assert_eq!(list.resources["memory"].string.as_deref(), Some("2Gi"));
    assert_eq!(list.encode_to_vec(), ld(1, &entry));
    assert!(shape_b::Empty {}.encode_to_vec().is_empty());
}

#[test]
fn shape_c_pool_resource_list_fields() {
    let entry = cat(&[ld(1, b"cpu"), ld(2, &ld(1, b"2"))]);
    let list = cat(&[ld(1, &entry), ld(2, b"pool"), ld(3, b"pre")]);
    let bytes = ld(1, &list);
    let pools = shape_c::PoolResourceList::decode(&bytes[..]).unwrap();
    assert_eq!(pools.resource_lists.len(), 1);
    let first = &pools.resource_lists[0];
    assert_eq!(first.resources["cpu"].string.as_deref(), Some("2"));
    assert_eq!(first.pool_name, "pool");
    assert_eq!(first.pool_prefix, "pre");
    assert_eq!(pools.encode_to_vec(), bytes);
    assert_eq!(
        shape_c::ClusterIdentity {
            cluster_id: "z".into()
        }
        .encode_to_vec(),
        ld(1, b"z")
    );
}

#[test]
fn every_shape_serves_the_unpackaged_resource_reader_service() {
    assert_eq!(
        shape_a::resource_reader_server::SERVICE_NAME,
        crate::SERVICE_NAME
    );
    assert_eq!(
        shape_b::resource_reader_server::SERVICE_NAME,
        crate::SERVICE_NAME
    );
    assert_eq!(
        shape_c::resource_reader_server::SERVICE_NAME,
        crate::SERVICE_NAME
    );
}

#[test]
fn descriptor_sets_name_the_methods() {
    for set in [
        shape_a::FILE_DESCRIPTOR_SET,
        shape_b::FILE_DESCRIPTOR_SET,
        shape_c::FILE_DESCRIPTOR_SET,
    ] {
        let text = String::from_utf8_lossy(set);
        for method in [
            "ReadResources",
            "RemoveCluster",
            "Subscribe",
            "resource_reader",
        ] {
            assert!(text.contains(method), "descriptor set lacks {method}");
        }
    }
}
