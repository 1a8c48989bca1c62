//! The audit records the test API server (`kube-test-server`) writes under
//! `KUBE_TEST_AUDIT_DIR`: one JSON object a line, one file per server,
//! each a resource request in RBAC terms with the user who made it.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// One request, as RBAC would authorize it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// `None` when the request's credentials were refused (401).
    pub user: Option<String>,
    pub verb: String,
    pub api_group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub code: u16,
}

impl Record {
    /// `resource` or `resource/subresource`, as a rule names it.
    pub fn rbac_resource(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.api_group.is_empty() {
            "core"
        } else {
            &self.api_group
        };
        write!(f, "{} {group}/{}", self.verb, self.rbac_resource())?;
        if let Some(name) = &self.name {
            write!(f, " {name:?}")?;
        }
        match &self.namespace {
            Some(ns) => write!(f, " in namespace {ns}")?,
            None => write!(f, " cluster-wide")?,
        }
        write!(f, " (answered {})", self.code)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not an audit record: {source}")]
    Parse {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
}

/// Every record of every `*.jsonl` file in `dir`.
pub fn read_dir(dir: &Path) -> Result<Vec<Record>, AuditError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| AuditError::Io { path, source }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io(dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    let mut records = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).map_err(io(&path))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record = serde_json::from_str(line).map_err(|source| AuditError::Parse {
                path: path.clone(),
                line: i + 1,
                source,
            })?;
            records.push(record);
        }
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lines_the_test_server_writes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("audit-1.jsonl"),
            "{\"user\":\"u\",\"verb\":\"update\",\"apiGroup\":\"authentication.liqo.io\",\"resource\":\"resourceslices\",\"subresource\":\"status\",\"namespace\":\"t\",\"name\":\"s\",\"code\":409}\n\n",
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let records = read_dir(dir.path()).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].rbac_resource(), "resourceslices/status");
        assert_eq!(
            records[0].to_string(),
            "update authentication.liqo.io/resourceslices/status \"s\" in namespace t (answered 409)"
        );
        std::fs::write(dir.path().join("bad.jsonl"), "{}\n").unwrap();
        assert!(matches!(
            read_dir(dir.path()),
            Err(AuditError::Parse { line: 1, .. })
        ));
    }
}
