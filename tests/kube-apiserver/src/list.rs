//! Lists: `kind: <Kind>List` with a collection `resourceVersion`, filtered
//! by namespace and selectors, in pages when asked (`limit`, `continue`);
//! items of a built-in kind without `kind` and `apiVersion`, a custom
//! resource's with them, as a real server writes typed and unstructured
//! lists.
//! Pages after the first are cut from the snapshot taken at the first, as
//! etcd serves them, and carry its resourceVersion; `remainingItemCount`
//! is given only without a selector (the real server counts etcd keys).
//! [`crate::KubeApiServer::set_max_page`] makes pages shorter than asked,
//! as real servers may. An unknown or expired `continue` token answers 410
//! Gone (`reason: Expired`).
//!
//! `resourceVersion` is read as a real server reads it ([`Read`]): unset
//! (the most recent state), `0` (any state; this server's is the most
//! recent), `N` or `N` with `resourceVersionMatch=NotOlderThan` (at least
//! as fresh as N: the most recent), `N` with `resourceVersionMatch=Exact`
//! (the state at exactly N, rolled back through the history; 410 Gone
//! once that history is compacted). An N the server has not reached waits
//! for it a while, then answers 504 "Too large resource version". Options
//! `ValidateListOptions` refuses are a 422 for `ListOptions`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

use crate::audit::SeenRequest;
use crate::crd::ResourceDef;
use crate::selector::Selector;
use crate::shared::{error_response, Shared};
use crate::status::{ApiError, Cause};
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

/// Which state of the world a list reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// `resourceVersion` unset, or `0`: the most recent.
    Latest,
    /// At least as fresh as this resourceVersion.
    NotOlderThan(u64),
    /// Exactly this resourceVersion.
    Exact(u64),
    /// The next page of a list: the snapshot its token names.
    Continue,
}

const EXPIRED_LIST: &str = "The resourceVersion for the provided list is too old.";

impl Read {
    /// The read a list request asks for, or the real server's refusal.
    pub fn of(seen: &SeenRequest) -> Result<Self, ApiError> {
        let rv = seen.resource_version.as_deref().unwrap_or("");
        let matching = seen.resource_version_match.as_deref().unwrap_or("");
        let continuing = seen.continue_token.is_some();
        let mut causes = Vec::new();
        let forbidden = |why: &str| {
            Cause::new(
                "FieldValueForbidden",
                "resourceVersionMatch",
                format!("Forbidden: {why}"),
            )
        };
        if !matching.is_empty() {
            if rv.is_empty() {
                causes.push(forbidden(
                    "resourceVersionMatch is forbidden unless resourceVersion is provided",
                ));
            }
            if continuing {
                causes.push(forbidden(
                    "resourceVersionMatch is forbidden when continue is provided",
                ));
            }
            if matching != "Exact" && matching != "NotOlderThan" {
                causes.push(Cause::new(
                    "FieldValueNotSupported",
                    "resourceVersionMatch",
                    format!(
                        "Unsupported value: {matching:?}: supported values: \"Exact\", \"NotOlderThan\", \"\""
                    ),
                ));
            }
            if matching == "Exact" && rv == "0" {
                causes.push(forbidden(
                    "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
        }
        if !causes.is_empty() {
            return Err(ApiError::invalid_list_options(causes));
        }
        if continuing {
            if !rv.is_empty() && rv != "0" {
                return Err(ApiError::bad_request(
                    "specifying resource version is not allowed when using continue",
                ));
            }
            return Ok(Read::Continue);
        }
        if rv.is_empty() || rv == "0" {
            return Ok(Read::Latest);
        }
        let n: u64 = rv
            .parse()
            .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv}")))?;
        Ok(if matching == "Exact" {
            Read::Exact(n)
        } else {
            Read::NotOlderThan(n)
        })
    }
}

pub async fn list(
    shared: &Shared,
    def: &ResourceDef,
    version: &str,
    seen: &SeenRequest,
    selector: &Selector,
) -> Response {
    let read = match Read::of(seen) {
        Ok(read) => read,
        Err(e) => return error_response(&e),
    };
    if let Read::NotOlderThan(n) | Read::Exact(n) = read {
        if let Err(e) = shared.wait_fresh(n).await {
            return error_response(&e);
        }
    }
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
    let (objects, rv): (Cow<'_, BTreeMap<String, Value>>, u64) = match (&continued, read) {
        (Some((id, _)), _) => match world.snapshots.get(id) {
            Some(snapshot) => (Cow::Borrowed(&snapshot.objects), snapshot.rv),
            None => (Cow::Borrowed(&empty), world.rv),
        },
        (None, Read::Exact(n)) => match world.objects_at(&gr, n) {
            Some(objects) => (Cow::Owned(objects), n),
            None => {
                world.counters(&gr).gone += 1;
                return error_response(&ApiError::gone(EXPIRED_LIST));
            }
        },
        (None, _) => (
            Cow::Borrowed(world.objects.get(&gr).unwrap_or(&empty)),
            world.rv,
        ),
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
            if def.custom {
                o["apiVersion"] = json!(api_version);
            } else if let Some(fields) = o.as_object_mut() {
                // A built-in list is a typed list (`ConfigMapList`…) whose
                // items the real server writes without `kind` and
                // `apiVersion` (kubectl's recorded ConfigMap list, as
                // `tests/golden.rs`'s `an_object_and_a_list_are_the_real_ones`
                // checks, sources in `golden/SOURCES.md`); a custom
                // resource's list is unstructured and keeps them.
                fields.remove("kind");
                fields.remove("apiVersion");
            }
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
                    objects: objects.into_owned(),
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
