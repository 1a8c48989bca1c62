//! The secrets of a service instance, sealed at rest with the catalog's
//! peering key ([`crate::providers::seal`]): the customer's peering
//! kubeconfig and each service binding's credentials. Each is bound (as
//! associated data) to its provider and instance, and credentials to their
//! binding too, so a sealed value copied into another record never opens.
//! They are never logged; only the selling provider reads the kubeconfig,
//! and only the platform that bound reads the credentials.

use std::collections::BTreeMap;

use base64::Engine;

use crate::http::ApiError;
use crate::providers::Providers;

fn customer_peering_aad(provider: &str, instance: &str) -> String {
    format!("osb\u{1f}customer-peering\u{1f}{provider}\u{1f}{instance}")
}

fn credentials_aad(provider: &str, instance: &str, binding: &str) -> String {
    format!("osb\u{1f}binding-credentials\u{1f}{provider}\u{1f}{instance}\u{1f}{binding}")
}

fn seal(providers: &Providers, aad: &str, text: &str) -> Result<String, ApiError> {
    let sealed = providers
        .sealer
        .seal(aad, text)
        .map_err(|e| ApiError::Internal(format!("sealing a service secret: {e}")))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(sealed))
}

fn open(providers: &Providers, aad: &str, sealed: &str) -> Result<String, ApiError> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(sealed)
        .map_err(|e| ApiError::Internal(format!("a sealed service secret: {e}")))?;
    providers
        .sealer
        .open(aad, &bytes)
        .map_err(|e| ApiError::Internal(format!("a sealed service secret: {e}")))
}

/// Seal the (canonical, checked) customer kubeconfig of `instance`.
pub fn seal_customer_peering(
    providers: &Providers,
    provider: &str,
    instance: &str,
    kubeconfig: &str,
) -> Result<String, ApiError> {
    seal(
        providers,
        &customer_peering_aad(provider, instance),
        kubeconfig,
    )
}

/// The customer kubeconfig sealed by [`seal_customer_peering`].
pub fn open_customer_peering(
    providers: &Providers,
    provider: &str,
    instance: &str,
    sealed: &str,
) -> Result<String, ApiError> {
    open(providers, &customer_peering_aad(provider, instance), sealed)
}

/// Seal the credentials a provider reported for `binding`.
pub fn seal_credentials(
    providers: &Providers,
    provider: &str,
    instance: &str,
    binding: &str,
    credentials: &BTreeMap<String, String>,
) -> Result<String, ApiError> {
    let text = serde_json::to_string(credentials)
        .map_err(|e| ApiError::Internal(format!("binding credentials: {e}")))?;
    seal(
        providers,
        &credentials_aad(provider, instance, binding),
        &text,
    )
}

/// The credentials sealed by [`seal_credentials`].
pub fn open_credentials(
    providers: &Providers,
    provider: &str,
    instance: &str,
    binding: &str,
    sealed: &str,
) -> Result<BTreeMap<String, String>, ApiError> {
    let text = open(
        providers,
        &credentials_aad(provider, instance, binding),
        sealed,
    )?;
    serde_json::from_str(&text)
        .map_err(|e| ApiError::Internal(format!("binding credentials of {binding}: {e}")))
}
