//! Every end-to-end test in one test binary.
//!
//! Each test module starts the real binaries and talks HTTP, WebSocket or
//! gRPC to them. They live in one binary rather than one per file because
//! each test executable links the whole client stack (tonic, reqwest,
//! tungstenite): eighteen copies cost gigabytes of disk and minutes of
//! linking on a two-core CI machine. nextest still runs every test in its
//! own process.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

mod aggregator_support;
mod autoscaler_support;
mod chart_support;
mod isolation_support;
mod liqo_stand_in;
mod liqo_support;
mod orchestrator_support;
mod purchase_controller_support;
mod slice_controller_support;

mod aggregator_cli;
mod aggregator_hardening;
mod aggregator_notify;
mod aggregator_reload;
mod aggregator_sum;
mod aggregator_upstreams;
mod autoscaler_faults;
mod autoscaler_ha;
mod autoscaler_scale_down;
mod autoscaler_scale_up;
mod catalog_api;
mod catalog_auth_pool;
mod catalog_buying;
mod catalog_contract_changes;
mod catalog_contract_peering;
mod catalog_contracts;
mod catalog_demo_liqo;
mod catalog_durability;
mod catalog_enforcement;
mod catalog_feed;
mod catalog_feed_mongo;
mod catalog_feed_resync;
mod catalog_hostile;
mod catalog_identities;
mod catalog_isolation;
mod catalog_labels;
mod catalog_list_body;
mod catalog_memory;
mod catalog_mongo_faults;
mod catalog_mongo_request_deadline;
mod catalog_offer_duplicate_keys;
mod catalog_oidc;
mod catalog_oidc_issuer;
mod catalog_osb;
mod catalog_osb_conformance;
mod catalog_peering_disabled;
mod catalog_peering_kubeconfig;
mod catalog_peering_v1_hint;
mod catalog_plan_stamps;
mod catalog_promises;
mod catalog_reservation_terms;
mod catalog_secrets;
mod catalog_service_offers;
mod catalog_shared;
mod catalog_signing_key;
mod chart_defects;
mod chart_monitoring;
mod chart_network_policy;
mod chart_requirements;
mod chart_values;
mod cli;
mod contract_follower;
mod controllers_unreachable_api;
mod duration_grammar;
mod install_with_kubectl;
mod log_level;
mod metrics_promtool;
mod multicluster_policy;
mod orchestrator;
mod peering_users;
mod peering_users_handover;
mod peering_users_promises;
mod peering_users_support;
mod peering_users_tls;
mod provider_agent;
mod provider_isolation;
mod purchase_controller;
mod purchase_controller_auto_peer;
mod purchase_controller_bidirectional;
mod purchase_controller_cluster_id;
mod purchase_controller_direct;
mod purchase_controller_ha;
mod purchase_controller_hostile_provider;
mod purchase_controller_reauth;
mod purchase_controller_secret_namespaces;
mod purchase_controller_shared_provider;
mod resource_monitor_chain;
mod resource_monitor_cli;
mod resource_monitor_hardening;
mod resource_monitor_kube_faults;
mod resource_monitor_kubernetes;
mod resource_monitor_shapes;
mod service_controller;
mod service_controller_admission;
mod service_controller_promises;
mod service_local_data_path;
mod shipped_rbac;
mod slice_controller;
mod slice_controller_admission;
mod slice_controller_contracts;
mod slice_controller_enforcement;
mod slice_controller_faults;
mod slice_controller_ha;
mod slice_controller_incluster;
mod slice_controller_liqo;
