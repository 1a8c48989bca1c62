//! Mapping an OIDC claim to catalog roles.

use std::collections::HashMap;

use serde_json::Value;

use crate::auth::Role;

/// Where the roles are and what their values mean.
#[derive(Debug, Clone)]
pub struct RoleMapping {
    /// The claim's path (`realm_access.roles` → `["realm_access", "roles"]`).
    path: Vec<String>,
    names: HashMap<String, Role>,
}

fn role_named(name: &str) -> Option<Role> {
    match name {
        "provider" => Some(Role::Provider),
        "consumer" => Some(Role::Consumer),
        "admin" => Some(Role::Admin),
        _ => None,
    }
}

impl RoleMapping {
    /// `claim` is the claim path; `extra` holds `value=role` pairs.
    pub fn new(claim: &str, extra: &[String]) -> anyhow::Result<Self> {
        let path: Vec<String> = claim.split('.').map(str::to_string).collect();
        if path.iter().any(String::is_empty) {
            anyhow::bail!("--oidc-roles-claim `{claim}` has an empty path segment");
        }
        let mut names: HashMap<String, Role> = ["provider", "consumer", "admin"]
            .iter()
            .filter_map(|n| Some((n.to_string(), role_named(n)?)))
            .collect();
        for pair in extra.iter().filter(|p| !p.trim().is_empty()) {
            let (value, role) = pair.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("--oidc-role-map entry `{pair}` is not value=role")
            })?;
            let role = role_named(role.trim()).ok_or_else(|| {
                anyhow::anyhow!(
                    "--oidc-role-map entry `{pair}`: role must be provider, consumer or admin"
                )
            })?;
            names.insert(value.trim().to_string(), role);
        }
        Ok(RoleMapping { path, names })
    }

    /// The catalog roles `claims` grant (unknown values are ignored).
    pub fn roles(&self, claims: &Value) -> Vec<Role> {
        let mut v = claims;
        for segment in &self.path {
            match v.get(segment) {
                Some(next) => v = next,
                None => return Vec::new(),
            }
        }
        let values: Vec<&str> = match v {
            Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
            Value::String(s) => s.split_whitespace().collect(),
            _ => Vec::new(),
        };
        let mut roles = Vec::new();
        for value in values {
            if let Some(role) = self.names.get(value) {
                if !roles.contains(role) {
                    roles.push(*role);
                }
            }
        }
        roles
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn reads_nested_claims_and_maps_names() {
        let m = RoleMapping::new("realm_access.roles", &["catalog-admins=admin".into()]).unwrap();
        let claims =
            json!({"realm_access": {"roles": ["catalog-admins", "consumer", "other", "consumer"]}});
        assert_eq!(m.roles(&claims), vec![Role::Admin, Role::Consumer]);
        assert!(
            m.roles(&json!({"roles": ["admin"]})).is_empty(),
            "wrong path"
        );
        let flat = RoleMapping::new("scope", &[]).unwrap();
        assert_eq!(
            flat.roles(&json!({"scope": "openid provider"})),
            vec![Role::Provider]
        );
        assert!(RoleMapping::new("a..b", &[]).is_err());
        assert!(RoleMapping::new("roles", &["x=root".into()]).is_err());
        assert!(RoleMapping::new("roles", &["nonsense".into()]).is_err());
    }
}
