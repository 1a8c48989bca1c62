//! The free-form objects of an offer body — `plans`, each plan's
//! `resources`, `labels` — read as maps that refuse a key given twice.
//!
//! JSON leaves duplicate names undefined (RFC 8259 §4: names "SHOULD be
//! unique") and parsers differ: serde's maps keep the last value, others
//! the first. `{"cpu":"1","cpu":"64"}` must not mean 64 here and 1 to the
//! next reader, so the catalog refuses it, as serde already refuses a
//! duplicate among the body's own (named) fields. The error is raised
//! while the map is read, so the request's 400 names where it is
//! (`plans.basic.resources`) and the message names the key.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{Deserialize, Deserializer, Error, MapAccess, Visitor};

struct Unique<V>(PhantomData<V>);

impl<'de, V: Deserialize<'de>> Visitor<'de> for Unique<V> {
    type Value = BTreeMap<String, V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(A::Error::custom(format!(
                    "duplicate key `{key}`: each key may appear only once in this object"
                )));
            }
            let value = map.next_value()?;
            out.insert(key, value);
        }
        Ok(out)
    }
}

/// A JSON object as a map, refusing a key given twice. For
/// `#[serde(deserialize_with)]`.
pub fn map<'de, D, V>(d: D) -> Result<BTreeMap<String, V>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    d.deserialize_map(Unique(PhantomData))
}

/// [`map`] for an optional object (`null` or absent: None).
pub fn optional_map<'de, D, V>(d: D) -> Result<Option<BTreeMap<String, V>>, D::Error>
where
    D: Deserializer<'de>,
    V: Deserialize<'de>,
{
    #[derive(serde::Deserialize)]
    #[serde(bound = "V: Deserialize<'de>")]
    struct Object<V>(#[serde(deserialize_with = "map")] BTreeMap<String, V>);
    Ok(Option::<Object<V>>::deserialize(d)?.map(|o| o.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    struct Body {
        #[serde(default, deserialize_with = "optional_map")]
        labels: Option<BTreeMap<String, String>>,
        #[serde(default, deserialize_with = "map")]
        resources: BTreeMap<String, u32>,
    }

    fn parse(json: &str) -> Result<Body, String> {
        crate::http::parse_json::<Body>(json.as_bytes()).map_err(|e| e.to_string())
    }

    #[test]
    fn a_key_given_twice_is_named_with_where_it_is() {
        let e = parse(r#"{"resources":{"cpu":1,"cpu":64}}"#).unwrap_err();
        assert!(e.starts_with("resources: duplicate key `cpu`"), "{e}");
        // An escaped spelling of the same name is the same key.
        let e = parse(r#"{"labels":{"a":"1","\u0061":"2"}}"#).unwrap_err();
        assert!(e.starts_with("labels: duplicate key `a`"), "{e}");
    }

    #[test]
    fn distinct_keys_and_absent_objects_read_as_before() {
        let b = parse(r#"{"labels":{"a":"1","b":"2"},"resources":{"cpu":1}}"#).unwrap();
        assert_eq!(b.labels.unwrap().len(), 2);
        assert_eq!(b.resources["cpu"], 1);
        let b = parse(r#"{"labels":null}"#).unwrap();
        assert!(b.labels.is_none() && b.resources.is_empty());
        assert!(parse(r#"{"labels":[1]}"#).is_err());
    }
}
