//! `--demo`: a demo provider with a few realistic offers (capacity, and one
//! service whose page can be walked through), created on first
//! start so a fresh catalog has something to show. Its credentials are
//! printed once, when it is created. Every start also prints a consumer
//! token (valid for `--token-ttl`) to sign in with in the web UI and buy.

use crate::auth::{secret, Role};
use crate::offers::{OfferSpec, OfferStore, ProviderRef};
use crate::providers::{ProviderAccount, Providers};

pub const DEMO_CLUSTER_ID: &str = "demo-provider";
/// The demo consumer's identity (the `sub` of its tokens).
pub const DEMO_CONSUMER: &str = "demo-consumer";
const DEMO_CLUSTER_NAME: &str = "Demo provider (Milan)";
const DEMO_AUTH_URL: &str = "https://demo-provider.liqo.example:443";

const DEMO_OFFERS: &[(&str, &str)] = &[
    (
        "demo-general",
        r#"{"name": "General purpose", "type": "compute", "description": "Balanced vCPU and memory for web apps and services.",
            "plans": {
              "small":  {"name": "gp-small",  "cost": "0.05", "resources": {"cpu": "2",  "memory": "4Gi",  "pods": "110"}},
              "medium": {"name": "gp-medium", "cost": "0.10", "resources": {"cpu": "4",  "memory": "8Gi",  "pods": "110"}},
              "large":  {"name": "gp-large",  "cost": "0.20", "resources": {"cpu": "8",  "memory": "16Gi", "pods": "220"}}}}"#,
    ),
    (
        "demo-storage",
        r#"{"name": "Storage-optimized offer", "type": "storage", "description": "For all your storage needs.",
            "plans": {
              "basic":  {"name": "plan-basic", "cost": "1.0", "resources": {"cpu": "1000m", "memory": "2G", "storage": "100G"}},
              "medium": {"planName": "plan-medium", "planID": "medium", "cost": "2.0",
                         "resources": {"cpu": "2000m", "memory": "4G", "storage": "300G"}}}}"#,
    ),
    (
        // A service beside the capacity (issue 45): its page in the web UI can
        // be walked through. Nothing in the demo provisions it — the demo
        // provider runs no service-controller — so an instance stays in
        // progress until deleted, as the description says.
        "demo-postgres",
        r#"{"name": "PostgreSQL", "type": "database", "kind": "service",
            "description": "A PostgreSQL database run for you. The provider's service-controller creates it and reports back; the demo provider runs none, so here an instance stays in progress until you delete it.",
            "plans": {
              "local":  {"name": "pg-at-provider", "cost": "0.08", "hosting": "Local",
                         "schemas": {
                           "service_instance": {"create": {"parameters": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                             "properties": {"version": {"type": "string", "enum": ["15", "16", "17"], "description": "PostgreSQL major version"},
                                            "storageGi": {"type": "integer", "minimum": 1, "maximum": 500, "description": "Disk, in GiB"}},
                             "required": ["version"], "additionalProperties": false}}},
                           "service_binding": {"create": {"parameters": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                             "properties": {"database": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,62}$", "description": "Database the credentials open"}},
                             "required": ["database"], "additionalProperties": false}}}}},
              "remote": {"name": "pg-in-your-cluster", "cost": "0.04", "hosting": "Remote",
                         "resources": {"cpu": "1", "memory": "2Gi"},
                         "schemas": {
                           "service_instance": {"create": {"parameters": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                             "properties": {"version": {"type": "string", "enum": ["15", "16", "17"], "description": "PostgreSQL major version"}},
                             "required": ["version"], "additionalProperties": false}}},
                           "service_binding": {"create": {"parameters": {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object",
                             "properties": {"database": {"type": "string", "pattern": "^[a-z][a-z0-9_]{0,62}$", "description": "Database the credentials open"}},
                             "required": ["database"], "additionalProperties": false}}}}}}}"#,
    ),
    (
        "demo-gpu",
        r#"{"name": "GPU inference", "type": "gpu", "description": "NVIDIA GPUs for model serving.",
            "plans": {
              "t4":   {"name": "gpu-t4",   "cost": "0.35", "resources": {"cpu": "4",  "memory": "16Gi", "nvidia.com/gpu": "1"}},
              "a100": {"name": "gpu-a100", "cost": "2.50", "resources": {"cpu": "12", "memory": "85Gi", "nvidia.com/gpu": "1"}}}}"#,
    ),
];

/// Create the demo provider and its offers unless the provider exists,
/// then print a demo consumer login.
pub async fn seed(providers: &Providers, offers: &dyn OfferStore) -> anyhow::Result<()> {
    seed_provider(providers, offers).await?;
    print_consumer_login(providers)
}

/// A fresh consumer token for the demo consumer, printed with where to use it.
fn print_consumer_login(providers: &Providers) -> anyhow::Result<()> {
    let issued = providers
        .tokens
        .issue(DEMO_CONSUMER, "Demo consumer", vec![Role::Consumer])?;
    println!(
        "demo consumer login (valid until {}): in the web UI choose \"Sign in to buy\" and paste this token:",
        issued.expires_at.to_rfc3339()
    );
    println!("  {}", issued.token);
    Ok(())
}

async fn seed_provider(providers: &Providers, offers: &dyn OfferStore) -> anyhow::Result<()> {
    if providers
        .store
        .get_provider(DEMO_CLUSTER_ID)
        .await?
        .is_some()
    {
        tracing::info!("demo provider already present; not seeding");
        // Demo offers seeded before they were stamped read `liqo: []`:
        // stamp them now (a no-op once they say what the provider runs).
        let stamp = providers.stamp(DEMO_CLUSTER_ID).await?;
        if let Err(e) = crate::offers::liqo::restamp(offers, DEMO_CLUSTER_ID, &stamp).await {
            // The demo still runs; the next start tries again.
            tracing::warn!(error = %e, "stamping the demo offers with Liqo generations failed");
        }
        return Ok(());
    }
    let token = {
        let key = crate::auth::SigningKey::generate()?;
        key.bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>()
    };
    let t = token.clone();
    let hash = tokio::task::spawn_blocking(move || secret::hash(&t))
        .await?
        .map_err(anyhow::Error::msg)?;
    let account = ProviderAccount {
        generation: 0,
        cluster_id: DEMO_CLUSTER_ID.into(),
        cluster_name: DEMO_CLUSTER_NAME.into(),
        auth_url: DEMO_AUTH_URL.into(),
        secret_hash: hash,
        created_at: crate::store::now(),
    };
    let (_, created) = providers.store.claim_provider(account).await?;
    if !created {
        return Ok(());
    }
    // So the demo plans can be bought: purchases hand out this token.
    providers
        .remember_peering_token(DEMO_CLUSTER_ID, &token)
        .await;
    // Stamped as every provider's offers are: with the generations it
    // peers with (v0: it has an auth URL).
    let stamp = providers.stamp(DEMO_CLUSTER_ID).await?;
    let owner = ProviderRef {
        cluster_id: DEMO_CLUSTER_ID.into(),
        cluster_name: DEMO_CLUSTER_NAME.into(),
        stamp,
    };
    for (id, body) in DEMO_OFFERS {
        let spec = OfferSpec::from_json(body.as_bytes())
            .map_err(|e| anyhow::anyhow!("demo offer {id}: {e}"))?;
        offers
            .put_offer(spec.into_draft((*id).to_string(), owner.clone()), None)
            .await?;
    }
    println!("demo provider created; its credentials (shown only now):");
    println!(
        "  {{\"clusterID\": \"{DEMO_CLUSTER_ID}\", \"clusterName\": \"{DEMO_CLUSTER_NAME}\", \"authURL\": \"{DEMO_AUTH_URL}\", \"token\": \"{token}\"}}"
    );
    Ok(())
}
