//! Lists: `kind: <Kind>List` with a collection `resourceVersion`, filtered
//! by namespace and selectors, in pages when asked (`limit`, `continue`).
//! Pages after the first are cut from the snapshot taken at the first, as
//! etcd serves them, and carry its resourceVersion; `remainingItemCount`
//! is given only without a selector (the real server counts etcd keys).
//! [`crate::KubeApiServer::set_max_page`] makes pages shorter than asked,
//! as real servers may. An unknown or expired `continue` token answers 410
//! Gone (`reason: Expired`).

use std::collections::BTreeMap;

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::audit::SeenRequest;
use crate::crd::ResourceDef;
use crate::selector::Selector;
use crate::shared::{error_response, Shared};
use crate::status::ApiError;
use crate::store::Snapshot;

/// Continue tokens name a snapshot and the last key served, hex-encoded so
/// they are opaque and survive any query encoding.
pub fn continue_token(snapshot: u64, last_key: &str) -> String {
    let hex: String = last_key.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{snapshot}-{hex}")
}

pub fn parse_continue_token(token: &str) -> Option<(u64, String)> {
    let (id, hex) = token.split_once('-')?;
    let id = id.parse().ok()?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((id, String::from_utf8(bytes).ok()?))
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a \
    consistent list result. You can start a new list without the continue parameter.";

pub fn list(
    shared: &Shared,
    def: &ResourceDef,
    version: &str,
    seen: &SeenRequest,
    selector: &Selector,
) -> Response {
    let mut world = shared.world();
    let gr = def.group_resource();
    let page_size = seen
        .limit
        .as_deref()
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .map(|l| world.max_page.map_or(l, |max| l.min(max)));
    // Where this page starts: a snapshot (continuing) or the world now.
    let continued = match seen.continue_token.as_deref() {
        None => None,
        Some(token) => match parse_continue_token(token)
            .filter(|(id, _)| world.snapshots.get(id).is_some_and(|s| s.gr == gr))
        {
            Some(position) => Some(position),
            None => {
                world.counters(&gr).gone += 1;
                return error_response(&ApiError::gone(EXPIRED_CONTINUE));
            }
        },
    };
    let counters = world.counters(&gr);
    counters.pages += 1;
    if continued.is_none() {
        counters.lists += 1;
    }
    let empty = BTreeMap::new();
    let (objects, rv) = match &continued {
        Some((id, _)) => match world.snapshots.get(id) {
            Some(snapshot) => (&snapshot.objects, snapshot.rv),
            None => (&empty, world.rv),
        },
        None => (world.objects.get(&gr).unwrap_or(&empty), world.rv),
    };
    let after = continued.as_ref().map(|(_, key)| key.as_str());
    let mut matching = objects
        .iter()
        .filter(|(key, _)| after.is_none_or(|after| key.as_str() > after))
        .filter(|(_, object)| selector.matches(object));
    let items: Vec<(&String, &Value)> = match page_size {
        Some(n) => matching.by_ref().take(n).collect(),
        None => matching.by_ref().collect(),
    };
    let remaining = matching.count();
    let last_key = items.last().map(|(key, _)| (*key).clone());
    let api_version = def.api_version(version);
    let items: Vec<Value> = items
        .into_iter()
        .map(|(_, o)| {
            let mut o = o.clone();
            o["apiVersion"] = json!(api_version);
            o
        })
        .collect();
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if remaining > 0 {
        let id = match &continued {
            Some((id, _)) => *id,
            None => {
                // The first page of a list that needs more: keep what the
                // following pages are cut from.
                let snapshot = Snapshot {
                    gr: gr.clone(),
                    rv,
                    objects: objects.clone(),
                };
                world.next_snapshot += 1;
                let id = world.next_snapshot;
                world.snapshots.insert(id, snapshot);
                id
            }
        };
        metadata["continue"] = json!(continue_token(id, &last_key.unwrap_or_default()));
        if selector.is_empty() {
            metadata["remainingItemCount"] = json!(remaining);
        }
    }
    let body = json!({
        "apiVersion": api_version,
        "kind": def.list_kind,
        "metadata": metadata,
        "items": items,
    });
    axum::Json(body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip() {
        let token = continue_token(3, "default/p1");
        assert_eq!(
            parse_continue_token(&token),
            Some((3, "default/p1".to_string()))
        );
        for bad in ["bogus", "99-0", "x-00", "1-zz"] {
            assert_eq!(parse_continue_token(bad), None, "{bad}");
        }
    }
}
