//! The buying endpoints' part of the catalog's OpenAPI document, merged
//! into it by the top-level `openapi` module. (The Open Service Broker
//! routes are described by the `osb` feature's own `openapi` module.)

use utoipa::OpenApi;

use super::{capacity, changes, contracts, http, model};
use crate::http::ErrorBody;
use catalog_client::wire::tenant_policy;

#[derive(OpenApi)]
#[openapi(
    paths(
        http::create,
        http::list,
        http::get,
        http::release,
        http::purchase,
        http::list_purchases,
        http::get_purchase,
        http::cancel,
        capacity::get,
        capacity::put,
        contracts::http::list,
        contracts::http::get,
        contracts::http::put_state,
        contracts::http::extend,
        contracts::http::attach_peering,
        contracts::http::put_network_policy,
        contracts::http::delete_network_policy,
        contracts::http::report_network_policy,
        changes::http::follow,
    ),
    components(schemas(
        model::Reservation,
        model::ReservationState,
        model::Channel,
        model::PurchaseWithPeering,
        http::PurchaseView,
        http::ReserveRequest,
        http::PurchaseRequest,
        http::PurchaseAnswer,
        contracts::model::Contract,
        catalog_client::wire::contract_stream::ContractEvent,
        model::ContractTerms,
        model::ContractState,
        contracts::model::Ended,
        contracts::model::ContractCredentials,
        contracts::model::V1Credentials,
        contracts::model::ContractPeering,
        contracts::peering::PeeringState,
        contracts::http::AttachRequest,
        contracts::http::ExtendBody,
        tenant_policy::ContractNetworkPolicy,
        tenant_policy::TenantPolicy,
        tenant_policy::TenantNetworkPolicy,
        tenant_policy::Selector,
        tenant_policy::Requirement,
        tenant_policy::TenantRule,
        tenant_policy::TenantPeer,
        tenant_policy::TenantIpBlock,
        tenant_policy::TenantPort,
        tenant_policy::PortRef,
        tenant_policy::TenantPolicyReport,
        tenant_policy::AppliedTenantPolicy,
        tenant_policy::RefusedTenantPolicy,
        crate::http::schemas::StateReport,
        capacity::Capacity,
        capacity::CapRequest,
        ErrorBody,
    ))
)]
pub struct BuyingDoc;
