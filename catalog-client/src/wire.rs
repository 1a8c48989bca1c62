//! The catalog's JSON, field for field: what its routes take and answer
//! and what its feed sends. No HTTP here (the crate's `client` feature is
//! not needed), so the server can serialise these very types; each type's
//! doc names the server type it mirrors.
//!
//! - [`cost`]: exact decimal costs, and the exact arithmetic a buyer adds
//!   them up with;
//! - [`pricing`]: the unit of every cost (currency and period);
//! - [`offer`]: offers and plans;
//! - [`provider`]: providers, their peering credentials, tokens, the levels
//!   their self-checks report (Liqo enforcement, tenant isolation);
//! - [`service`]: a provider's side of a service contract: its reports,
//!   the customer's peering kubeconfig, pending bindings;
//! - [`service_instance`]: the caller's service instances as the catalog
//!   lists them (`GET /service-instances`);
//! - [`contract`]: contracts, reservations and state reports;
//! - [`contract_stream`]: the lines of `GET /contract-changes`;
//! - [`tenant_policy`]: a buyer's network policy for its pods on one
//!   provider, carried on its contracts, and the provider's report;
//! - [`feed`]: the messages of `GET /subscribe`;
//! - [`error_body`]: the body of every error answer;
//! - [`names`]: the Kubernetes name rule of fields that become object names.

pub mod contract;
pub mod contract_stream;
pub mod cost;
pub mod error_body;
pub mod feed;
pub mod names;
pub mod offer;
pub mod pricing;
pub mod provider;
pub mod service;
pub mod service_instance;
pub mod tenant_policy;

pub use contract::{reason_step, step_reason, MAX_BOUGHT_BY_CHARS, MAX_REASON_LEN};
pub use contract::{
    AttachCredentials, Contract, ContractCredentials, ContractPeering, ContractState, Ended,
    ExtendRequest, PeeringState, PurchaseRequest, Reservation, ReserveRequest, StateReport,
    V1Credentials,
};
pub use contract_stream::ContractEvent;
pub use cost::{Cost, CostError};
pub use error_body::ErrorBody;
pub use feed::FeedEvent;
pub use offer::{
    HostingPolicy, InputParametersSchema, Offer, OfferKind, Plan, PlanSchemas,
    ServiceBindingSchemas, ServiceInstanceSchemas, Writer,
};
pub use pricing::{check_currency, CostPeriod, Pricing, PricingError};
pub use provider::{
    AdminLogin, AdminProvider, EnforcementLevel, EnforcementReport, IsolationLevel,
    IsolationReport, IssuedToken, LiqoGeneration, PeeringCredentials, ProviderInfo, ReportedLevel,
};
pub use service::{
    is_credential_key, BindingReport, CustomerPeering, PendingBinding, PendingBindingState,
    ServiceReport, ServiceState,
};
pub use tenant_policy::{ContractNetworkPolicy, PolicyError, TenantPolicy, TenantPolicyReport};
