//! The Open Service Broker part of the catalog's OpenAPI document, merged
//! into it by [`crate::http::schemas::document`]: the `/v2` operations and
//! the shapes of their answers (declared in [`super::responses`]).

use utoipa::OpenApi;

use super::responses::*;
use super::{
    bindings, catalog, customer_peering, instances, provider_bindings, provider_report, update,
};

#[derive(OpenApi)]
#[openapi(
    paths(
        catalog::get,
        instances::provision,
        update::update,
        instances::fetch,
        instances::deprovision,
        instances::last_operation,
        bindings::bind,
        bindings::fetch,
        bindings::unbind,
        bindings::last_operation,
        provider_report::put,
        customer_peering::get,
        provider_bindings::list,
        provider_bindings::put,
    ),
    components(schemas(
        OsbErrorBody,
        OsbEmpty,
        OsbAsyncOperation,
        OsbCatalog,
        OsbService,
        OsbPlan,
        OsbInstanceView,
        OsbOperationState,
        OsbLastOperation,
        OsbBindingCredentials,
        OsbBindingView,
        instances::ProvisionRequest,
        update::UpdateRequest,
        bindings::BindRequest,
        catalog_client::wire::ServiceReport,
        catalog_client::wire::ServiceState,
        catalog_client::wire::CustomerPeering,
        catalog_client::wire::PendingBinding,
        catalog_client::wire::PendingBindingState,
        catalog_client::wire::BindingReport,
    ))
)]
pub struct OsbDoc;
