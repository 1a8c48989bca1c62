//! An offer to publish, read from a YAML or JSON file and sent to the
//! catalog as JSON, field for field: the catalog validates it (its 400
//! names the field), so a file is judged by the same rules as the API.
//!
//! YAML caveat, the same as `kubectl`'s (sigs.k8s.io/yaml reads numbers
//! through float64): an unquoted number with more digits than a double
//! holds loses them. Quote costs and quantities (`cost: "1.10"`) to keep
//! them exact; JSON numbers are kept digit for digit as the catalog reads
//! them only when the file is JSON.

use std::path::Path;

use serde_json::Value;

use crate::exit::{Code, Failure};

/// Largest offer file read (the catalog's own body limit is smaller).
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// An offer file's content and the id to publish it under.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferFile {
    pub id: String,
    pub body: Value,
}

/// Read `path` (`--file`), publishing under `id` or the file's own `id`.
pub fn load(path: &Path, id: Option<&str>) -> Result<OfferFile, Failure> {
    let text = edge::config_file::read("--file", path, MAX_FILE_BYTES)
        .map_err(|e| Failure::usage(e.to_string()))?;
    parse(path, &text, id)
}

/// [`load`] of `text`, read from `path` (its extension picks the format).
pub fn parse(path: &Path, text: &str, id: Option<&str>) -> Result<OfferFile, Failure> {
    let name = path.display();
    let extension = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let body: Value = match extension.as_deref() {
        Some("json") => serde_json::from_str(text)
            .map_err(|e| Failure::usage(format!("{name}: not valid JSON: {e}")))?,
        Some("yaml" | "yml") => serde_yaml_ng::from_str(text)
            .map_err(|e| Failure::usage(format!("{name}: not valid YAML: {e}")))?,
        // YAML is a superset of JSON: one parser reads both.
        _ => serde_yaml_ng::from_str(text)
            .map_err(|e| Failure::usage(format!("{name}: neither JSON nor YAML: {e}")))?,
    };
    if !body.is_object() {
        return Err(Failure::usage(format!(
            "{name}: an offer is a mapping (name, type, plans, …), not {}",
            kind(&body)
        )));
    }
    let id = match (id, body.get("id")) {
        (Some(id), _) => id.to_string(),
        (None, Some(Value::String(id))) => id.clone(),
        (None, _) => {
            return Err(Failure::new(
                Code::Usage,
                format!("{name}: no offer id: pass --id or give the file an `id`"),
            ))
        }
    };
    Ok(OfferFile { id, body })
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "empty",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const YAML: &str = "id: gpu-1\nname: GPU\ntype: gpu\nplans:\n  small:\n    name: small\n    cost: \"1.10\"\n    resources: {cpu: \"2\", memory: 4Gi}\n";

    #[test]
    fn yaml_and_json_read_the_same_offer() {
        let from_yaml = parse(Path::new("o.yaml"), YAML, None).unwrap();
        assert_eq!(from_yaml.id, "gpu-1");
        assert_eq!(from_yaml.body["plans"]["small"]["cost"], "1.10");
        let json = serde_json::to_string(&from_yaml.body).unwrap();
        let from_json = parse(Path::new("o.json"), &json, Some("other")).unwrap();
        assert_eq!(from_json.id, "other");
        assert_eq!(from_json.body, from_yaml.body);
        // No extension: whichever parses.
        assert_eq!(
            parse(Path::new("o"), &json, None).unwrap().body,
            from_yaml.body
        );
    }

    #[test]
    fn unusable_files_say_why_and_exit_as_usage_errors() {
        let e = parse(Path::new("o.yaml"), "name: x\n", None).unwrap_err();
        assert_eq!(e.code, Code::Usage);
        assert!(e.message.contains("--id"), "{e}");
        let e = parse(Path::new("o.yaml"), "- a\n- b\n", Some("x")).unwrap_err();
        assert!(e.message.contains("not a list"), "{e}");
        let e = parse(Path::new("o.json"), "{\"name\": ", Some("x")).unwrap_err();
        assert!(e.message.contains("o.json: not valid JSON"), "{e}");
    }
}
