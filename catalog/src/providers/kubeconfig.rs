//! The kubeconfig check lives in `catalog-client` (one allow-list for the
//! catalog and every controller that builds a client from a peering user's
//! kubeconfig); this name keeps the catalog's imports as they were.

pub use catalog_client::kubeconfig::*;
