//! `PUT /provider/peering` and `GET /provider/peering`: a provider
//! registers the Liqo it runs — Liqo v1 with a peering user per contract,
//! or one peering user's kubeconfig if it declares itself single-consumer
//! (sealed at rest like the v0 token, released only inside a contract's
//! credentials) — and the ResourceSlice class its controller enforces, and
//! reads back which generations it peers with (never the kubeconfig).
//!
//! Also the [`Providers`] methods the buying feature asks: a provider's
//! generations, its v0 credentials (only when it has an auth URL), its
//! kubeconfig, and sealing and opening a contract's own kubeconfig (every
//! kubeconfig taken in passes [`kubeconfig::canonical`]).

use actix_web::{web, HttpRequest, HttpResponse};
use base64::Engine;
use serde::{Deserialize, Serialize};

use super::kubeconfig;
use super::model::{
    generations, EnforcementLevel, IsolationLevel, LiqoGeneration, OwnerStamp, PeeringCredentials,
    ProviderPeering, DEFAULT_SLICE_CLASS, KUBECONFIG_SEAL_LABEL,
};
use super::{ProviderStore, Providers};
use crate::auth::{Caller, Role};
use crate::http::{documented_error, parse_object, read_json_body, ApiError, ErrorBody};
use crate::store::StoreError;

/// Told when what a provider's offers carry of it (its generations, its
/// enforcement and isolation levels) changes, so they are re-stamped (the
/// offers feature implements it; the top wires it in).
#[async_trait::async_trait]
pub trait StampChanged: Send + Sync + 'static {
    async fn changed(&self, cluster_id: &str, stamp: &OwnerStamp);
}

/// What `cluster_id`'s offers carry of it (nothing without an account).
pub async fn stamp_of(
    store: &dyn ProviderStore,
    cluster_id: &str,
) -> Result<OwnerStamp, StoreError> {
    let Some(account) = store.get_provider(cluster_id).await? else {
        return Ok(OwnerStamp::default());
    };
    let peering = store.get_provider_peering(cluster_id).await?;
    Ok(OwnerStamp::of(&account, peering.as_ref()))
}

/// The generations `cluster_id` peers with (none without an account).
pub async fn liqo_of(
    store: &dyn ProviderStore,
    cluster_id: &str,
) -> Result<Vec<LiqoGeneration>, StoreError> {
    let Some(account) = store.get_provider(cluster_id).await? else {
        return Ok(Vec::new());
    };
    let peering = store.get_provider_peering(cluster_id).await?;
    Ok(generations(&account, peering.as_ref()))
}

/// `PUT /provider/peering` body.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"v1": null, "resourceSliceClass": "liqo-broker"}))]
pub struct PeeringRequest {
    /// The Liqo v1 peering credentials; absent or null: the provider does
    /// not peer with Liqo v1 (a kubeconfig registered before is dropped).
    #[serde(default)]
    pub v1: Option<V1Peering>,
    /// The ResourceSlice class the provider's controller enforces (a
    /// DNS-1123 subdomain, not `default`). Default `liqo-broker`.
    #[serde(default, rename = "resourceSliceClass")]
    #[schema(
        max_length = 253,
        pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
    )]
    pub resource_slice_class: Option<String>,
}

/// How the provider peers with Liqo v1.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"singleConsumer": false}))]
pub struct V1Peering {
    /// A peering user's kubeconfig as YAML text (`liqoctl generate
    /// peering-user`), at most 32 KiB: one cluster with an `https://`
    /// server (no userinfo, query or fragment) and optionally
    /// `certificate-authority-data` holding certificates; one user with a
    /// token or an embedded client certificate and key; one context naming
    /// them (optionally a namespace), current; optionally `preferences:
    /// {}`. Nothing else: no exec, auth-provider, file paths, proxy,
    /// insecure or tls-server-name keys, unknown keys, YAML anchors,
    /// aliases, tags or merge keys. Consumers receive a re-serialised copy
    /// built from these fields, never the text sent. Accepted only with
    /// `singleConsumer: true`: a Liqo peering user serves exactly one
    /// consumer cluster. Absent: the provider attaches a peering user to
    /// each contract (`PUT /provider/contracts/{id}/peering`).
    #[serde(default)]
    #[schema(max_length = 32768)]
    pub kubeconfig: Option<String>,
    /// The provider sells to one consumer cluster only, so its one
    /// kubeconfig may go to every contract. Requires `kubeconfig`.
    #[serde(default, rename = "singleConsumer")]
    pub single_consumer: bool,
}

/// Why a shared kubeconfig is refused (`v1.kubeconfig` without
/// `singleConsumer: true`): the peering user's RoleBindings exist only in
/// `liqo-tenant-<one consumer>` (`liqoctl generate peering-user
/// --consumer-cluster-id`, Liqo v1.2.0 pkg/liqoctl/rest/peering-user/generate.go).
pub const SHARED_KUBECONFIG_REFUSED: &str = "a Liqo peering user serves exactly one consumer cluster (its RoleBindings exist only in that consumer's tenant namespace), so one kubeconfig cannot serve every buyer: leave it out and attach a peering user to each contract (PUT /provider/contracts/{id}/peering), or declare `v1.singleConsumer: true` if this provider sells to one consumer cluster only";

/// What a provider registered, as anyone may see it (no kubeconfig).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct PeeringInfo {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    /// The Liqo generations it peers with: `v0` with a non-empty auth URL,
    /// `v1` with a registered kubeconfig.
    pub liqo: Vec<LiqoGeneration>,
    #[serde(rename = "resourceSliceClass")]
    pub resource_slice_class: String,
    /// With `v1`: true when one registered kubeconfig goes to every
    /// contract (declared single-consumer); false when each contract gets
    /// its own (`PUT /provider/contracts/{id}/peering`).
    #[serde(
        rename = "singleConsumer",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schema(nullable = false)]
    pub single_consumer: Option<bool>,
    /// The Liqo enforcement level last reported with `PUT
    /// /provider/enforcement`, stamped on the provider's offers; absent if
    /// none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub enforcement: Option<EnforcementLevel>,
    /// The tenant-isolation level last reported with `PUT
    /// /provider/isolation`, stamped on the provider's offers; absent if
    /// none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub isolation: Option<IsolationLevel>,
}

impl PeeringInfo {
    /// What the provider's offers carry of it.
    pub fn stamp(&self) -> OwnerStamp {
        OwnerStamp {
            liqo: self.liqo.clone(),
            enforcement: self.enforcement,
            isolation: self.isolation,
        }
    }
}

/// A ResourceSlice class as Liqo accepts it: a DNS-1123 subdomain (at most
/// 253 characters of `a-z 0-9 - .`, labels starting and ending with a
/// letter or digit), and neither empty nor `default` (Liqo's own class).
pub fn check_slice_class(class: &str) -> Result<(), String> {
    if class.is_empty() || class == "default" {
        return Err("must name a class of its own, not \"\" or \"default\" (Liqo's)".into());
    }
    if !catalog_client::wire::names::is_dns_subdomain(class) {
        return Err(
            "must be a DNS-1123 subdomain: at most 253 characters of a-z 0-9 - ., each dot-separated part starting and ending with a letter or digit"
                .into(),
        );
    }
    Ok(())
}

/// The calling provider's cluster ID (403 for any other role).
pub(super) fn provider(caller: &Caller) -> Result<&str, ApiError> {
    caller.require(Role::Provider)?;
    Ok(&caller.cluster_id)
}

documented_error!(
    /// The 400 of a provider's change to what it registered (its peering,
    /// its enforcement and isolation levels).
    RegistrationInvalid,
    400,
    ErrorBody,
    "Invalid body; `field` names the bad field (nothing changed)"
);

documented_error!(
    /// The 403 of a provider's change to what it registered: the caller is
    /// no provider, or an administrator disabled it
    /// ([`Providers::require_enabled`]).
    RegistrationRefused,
    403,
    ErrorBody,
    "Not a provider, or the provider is disabled (nothing changed)"
);

/// Register the Liqo a provider runs (replacing what it registered before).
///
/// A provider an administrator disabled cannot change it (403).
#[utoipa::path(
    put, path = "/provider/peering", tag = "providers", operation_id = "putProviderPeering",
    request_body = PeeringRequest,
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider"]))),
    responses(
        (status = 200, description = "Registered", body = PeeringInfo),
        RegistrationInvalid,
        (status = 401, description = "No valid token", body = ErrorBody),
        RegistrationRefused,
        crate::http::StoreUnreachable,
    )
)]
pub async fn put(
    state: web::Data<Providers>,
    caller: Caller,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let cluster_id = provider(&caller)?;
    state
        .require_enabled(cluster_id, "peering registration")
        .await?;
    let body = read_json_body(&req, payload, state.max_body_bytes).await?;
    let r: PeeringRequest = parse_object(&body)?;
    let class = r
        .resource_slice_class
        .unwrap_or_else(|| DEFAULT_SLICE_CLASS.to_string());
    check_slice_class(&class).map_err(|m| ApiError::bad_request("resourceSliceClass", m))?;
    let (sealed, per_contract, single_consumer) =
        match &r.v1 {
            None => (None, false, false),
            Some(V1Peering {
                kubeconfig: None,
                single_consumer: true,
            }) => return Err(ApiError::bad_request(
                "v1.kubeconfig",
                "is required with `singleConsumer: true` (the one kubeconfig every contract gets)",
            )),
            Some(V1Peering {
                kubeconfig: None, ..
            }) => (None, true, false),
            Some(V1Peering {
                kubeconfig: Some(text),
                single_consumer,
            }) => {
                // Checked first, so a bad kubeconfig is named as such.
                let canonical = kubeconfig::canonical(text)
                    .map_err(|e| ApiError::bad_request("v1.kubeconfig", e.0))?;
                if !single_consumer {
                    return Err(ApiError::bad_request(
                        "v1.kubeconfig",
                        SHARED_KUBECONFIG_REFUSED,
                    ));
                }
                // Only the canonical copy is kept: never the bytes received.
                let sealed = state
                    .sealer
                    .seal(&kubeconfig_aad(cluster_id), &canonical)
                    .map_err(|e| ApiError::Internal(format!("sealing the kubeconfig: {e}")))?;
                (
                    Some(base64::engine::general_purpose::STANDARD.encode(sealed)),
                    false,
                    true,
                )
            }
        };
    let before = state.stamp(cluster_id).await?;
    let peering = ProviderPeering {
        resource_slice_class: class,
        sealed_kubeconfig: sealed,
        v1_per_contract: per_contract,
        single_consumer,
        // Reported by the provider's controllers, not registered here.
        enforcement: before.enforcement,
        isolation: before.isolation,
        updated_at: crate::store::now(),
    };
    state
        .store
        .put_provider_peering(cluster_id, peering)
        .await?;
    tracing::info!(
        cluster_id,
        v1 = r.v1.is_some(),
        "provider peering registered"
    );
    let info = state.peering_info(cluster_id).await?;
    state
        .stamp_changed(cluster_id, &before, &info.stamp())
        .await;
    Ok(HttpResponse::Ok().json(info))
}

/// What the calling provider registered, and the generations it peers with.
#[utoipa::path(
    get, path = "/provider/peering", tag = "providers", operation_id = "getProviderPeering",
    security(("bearer" = [])),
    extensions(("x-roles" = json!(["provider"]))),
    responses(
        (status = 200, description = "The provider's peering registration (the default class and v0 alone if it registered nothing)", body = PeeringInfo),
        (status = 401, description = "No valid token", body = ErrorBody),
        (status = 403, description = "Not a provider", body = ErrorBody),
        crate::http::StoreUnreachable,
    )
)]
pub async fn get(state: web::Data<Providers>, caller: Caller) -> Result<HttpResponse, ApiError> {
    let cluster_id = provider(&caller)?;
    Ok(HttpResponse::Ok().json(state.peering_info(cluster_id).await?))
}

/// Associated data of `cluster_id`'s sealed kubeconfig.
fn kubeconfig_aad(cluster_id: &str) -> String {
    format!("{cluster_id}\u{1f}{KUBECONFIG_SEAL_LABEL}")
}

/// Associated data of contract `contract_id`'s sealed kubeconfig.
fn contract_kubeconfig_aad(cluster_id: &str, contract_id: &str) -> String {
    format!("{cluster_id}\u{1f}{KUBECONFIG_SEAL_LABEL}\u{1f}{contract_id}")
}

impl Providers {
    /// `cluster_id`'s registration and generations (404 without an account).
    pub async fn peering_info(&self, cluster_id: &str) -> Result<PeeringInfo, ApiError> {
        let account = self
            .store
            .get_provider(cluster_id)
            .await?
            .ok_or_else(|| ApiError::NotFound(format!("no provider {cluster_id}")))?;
        let peering = self.store.get_provider_peering(cluster_id).await?;
        let liqo = generations(&account, peering.as_ref());
        let single_consumer = liqo.contains(&LiqoGeneration::V1).then(|| {
            peering
                .as_ref()
                .is_some_and(ProviderPeering::shares_kubeconfig)
        });
        let enforcement = peering.as_ref().and_then(|p| p.enforcement);
        let isolation = peering.as_ref().and_then(|p| p.isolation);
        Ok(PeeringInfo {
            cluster_id: account.cluster_id.clone(),
            liqo,
            resource_slice_class: peering
                .map(|p| p.resource_slice_class)
                .unwrap_or_else(|| DEFAULT_SLICE_CLASS.to_string()),
            single_consumer,
            enforcement,
            isolation,
        })
    }

    /// 403 if an administrator disabled `cluster_id`: what it registered
    /// (`what`) stays as the administrator found it, since a change would
    /// re-stamp its offers.
    pub async fn require_enabled(&self, cluster_id: &str, what: &str) -> Result<(), ApiError> {
        if self.is_disabled(cluster_id).await? {
            return Err(ApiError::Forbidden(format!(
                "provider {cluster_id} is disabled by an administrator; its {what} cannot change"
            )));
        }
        Ok(())
    }

    /// What `cluster_id`'s offers carry of it.
    pub async fn stamp(&self, cluster_id: &str) -> Result<OwnerStamp, ApiError> {
        Ok(stamp_of(&*self.store, cluster_id).await?)
    }

    /// The generations `cluster_id` peers with (none without an account).
    pub async fn liqo(&self, cluster_id: &str) -> Result<Vec<LiqoGeneration>, ApiError> {
        Ok(liqo_of(&*self.store, cluster_id).await?)
    }

    /// Tell the hook (the offers' re-stamping) if `before` and `after`
    /// differ.
    pub async fn stamp_changed(&self, cluster_id: &str, before: &OwnerStamp, after: &OwnerStamp) {
        if before != after {
            if let Some(hook) = &self.on_stamp {
                hook.changed(cluster_id, after).await;
            }
        }
    }

    /// `cluster_id`'s v0 credentials, or None when it peers only with v1
    /// (an empty auth URL).
    pub async fn v0_credentials(
        &self,
        cluster_id: &str,
    ) -> Result<Option<PeeringCredentials>, ApiError> {
        let account = self.store.get_provider(cluster_id).await?;
        if account.is_some_and(|a| a.auth_url.is_empty()) {
            return Ok(None);
        }
        self.credentials(cluster_id).await.map(Some)
    }

    /// `cluster_id`'s registered kubeconfig, opened and in its canonical
    /// form, if any (None, logged, if it no longer passes the check).
    pub async fn kubeconfig(&self, cluster_id: &str) -> Result<Option<String>, ApiError> {
        let Some(sealed) = self
            .store
            .get_provider_peering(cluster_id)
            .await?
            .and_then(|p| p.sealed_kubeconfig)
        else {
            return Ok(None);
        };
        self.open_kubeconfig(cluster_id, &kubeconfig_aad(cluster_id), &sealed)
    }

    /// Check `text` with the catalog's one kubeconfig check (400 naming
    /// `field`) and seal its canonical copy for contract `contract_id` of
    /// provider `cluster_id` (base64, bound to both, so it never opens as
    /// another contract's nor as the provider's own).
    pub fn seal_contract_kubeconfig(
        &self,
        cluster_id: &str,
        contract_id: &str,
        field: &str,
        text: &str,
    ) -> Result<String, ApiError> {
        let canonical =
            kubeconfig::canonical(text).map_err(|e| ApiError::bad_request(field, e.0))?;
        let sealed = self
            .sealer
            .seal(
                &contract_kubeconfig_aad(cluster_id, contract_id),
                &canonical,
            )
            .map_err(|e| ApiError::Internal(format!("sealing the kubeconfig: {e}")))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(sealed))
    }

    /// Contract `contract_id`'s own kubeconfig, sealed by
    /// [`Providers::seal_contract_kubeconfig`], opened and in its canonical
    /// form (None, logged, if it no longer passes the check).
    pub fn contract_kubeconfig(
        &self,
        cluster_id: &str,
        contract_id: &str,
        sealed: &str,
    ) -> Result<Option<String>, ApiError> {
        self.open_kubeconfig(
            cluster_id,
            &contract_kubeconfig_aad(cluster_id, contract_id),
            sealed,
        )
    }

    fn open_kubeconfig(
        &self,
        cluster_id: &str,
        aad: &str,
        sealed: &str,
    ) -> Result<Option<String>, ApiError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|e| ApiError::Internal(format!("sealed kubeconfig of {cluster_id}: {e}")))?;
        let opened = self
            .sealer
            .open(aad, &bytes)
            .map_err(|e| ApiError::Internal(format!("sealed kubeconfig of {cluster_id}: {e}")))?;
        // Checked again on the way out: a kubeconfig stored before the
        // check was strict is released only if it passes today's, and
        // then only as its canonical copy.
        match kubeconfig::canonical(&opened) {
            Ok(canonical) => Ok(Some(canonical)),
            Err(e) => {
                tracing::warn!(
                    cluster_id,
                    error = %e,
                    "stored kubeconfig refused on release; the provider must register it again"
                );
                Ok(None)
            }
        }
    }

    /// Why a purchase from `cluster_id` would have no credentials to hand
    /// over, with the provider's fix ([`sell_blocker`]); None when it has
    /// v0 (an auth URL and its sealed token) or a v1 kubeconfig.
    pub async fn cannot_sell(&self, cluster_id: &str) -> Result<Option<String>, ApiError> {
        let liqo = self.liqo(cluster_id).await?;
        let v0 = liqo.contains(&LiqoGeneration::V0);
        let token = v0 && self.has_peering_token(cluster_id).await?;
        Ok(sell_blocker(
            cluster_id,
            v0,
            token,
            liqo.contains(&LiqoGeneration::V1),
        ))
    }
}

/// Why provider `cluster_id` cannot sell, naming what it must do: `v0`
/// when it has an auth URL, `token` when its v0 token is on file, `v1`
/// when a kubeconfig is registered. A provider with an auth URL gets its
/// token kept by `POST /authenticate`; one without (Liqo v1 alone) can
/// only register a kubeconfig, so authenticating again would not help it.
pub fn sell_blocker(cluster_id: &str, v0: bool, token: bool, v1: bool) -> Option<String> {
    if (v0 && token) || v1 {
        return None;
    }
    Some(if v0 {
        format!(
            "provider {cluster_id} has no peering credentials on file yet: it must authenticate again (POST /authenticate) before its plans can be bought"
        )
    } else {
        format!(
            "provider {cluster_id} peers only with Liqo v1 (no auth URL) and has not registered how: it must register with PUT /provider/peering (`{{\"v1\": {{}}}}` to attach a peering user to each contract) before its plans can be bought"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_cannot_sell_is_told_its_own_fix() {
        assert_eq!(sell_blocker("c", true, true, false), None);
        assert_eq!(sell_blocker("c", false, false, true), None);
        let v0 = sell_blocker("c", true, false, false).unwrap();
        assert!(v0.contains("POST /authenticate"), "{v0}");
        let v1 = sell_blocker("c", false, false, false).unwrap();
        assert!(v1.contains("PUT /provider/peering"), "{v1}");
        assert!(!v1.contains("authenticate"), "{v1}");
    }

    #[test]
    fn slice_classes() {
        for ok in ["liqo-broker", "a", "my.class-1", "x.y.z"] {
            check_slice_class(ok).unwrap();
        }
        for bad in [
            "",
            "default",
            "Upper",
            "-x",
            "x-",
            "a..b",
            "a_b",
            &"a".repeat(254),
        ] {
            assert!(check_slice_class(bad).is_err(), "{bad}");
        }
    }
}
