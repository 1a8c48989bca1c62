//! HTTP clients for the tests, all built one way.
//!
//! reqwest is built with rustls and no bundled crypto provider across the
//! workspace (the catalog and the agent pick `ring`), and such a client
//! panics at construction unless a provider is installed, even for plain
//! `http://` URLs. Every test client is built here so that happens once.

use std::time::Duration;

fn install_crypto_provider() {
    // Err only means another provider is already installed: fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A blocking client for loopback servers: no proxy, bounded by `timeout`.
pub fn blocking_client(timeout: Duration) -> reqwest::blocking::Client {
    install_crypto_provider();
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .expect("build a blocking HTTP client")
}

/// An async client for loopback servers: no proxy, bounded by `timeout`.
pub fn async_client(timeout: Duration) -> reqwest::Client {
    install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .timeout(timeout)
        .build()
        .expect("build an HTTP client")
}
