//! Liqo's ResourceReader gRPC API in the three wire shapes real Liqo releases
//! speak. Every shape declares no proto `package`, so every method path is
//! `/resource_reader/<Method>`; only the messages differ.
//!
//! - [`shape_a`]: the thesis design, Liqo v0.5.x (`--external-monitor`).
//! - [`shape_b`]: Liqo v0.6.0 … v0.8.x.
//! - [`shape_c`]: Liqo v0.9.0 … v0.10.3 (resource pools; also v0.11.0-rc.1/rc.2).

/// Kubernetes' `k8s.io.apimachinery.pkg.api.resource` proto package (the
/// `Quantity` message only), shared by shapes B and C.
pub mod k8s {
    include!(concat!(
        env!("OUT_DIR"),
        "/k8s/k8s.io.apimachinery.pkg.api.resource.rs"
    ));
}

/// Shape A: string maps, empty notifications.
pub mod shape_a {
    include!(concat!(env!("OUT_DIR"), "/shape_a/_.rs"));

    /// Encoded `FileDescriptorSet` of this shape, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/shape_a/descriptor.bin"));
}

/// Shape B: Kubernetes `Quantity` messages, notifications naming a cluster.
pub mod shape_b {
    include!(concat!(env!("OUT_DIR"), "/shape_b/_.rs"));

    /// Encoded `FileDescriptorSet` of this shape, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/shape_b/descriptor.bin"));
}

/// Shape C: as B, but a read answers one resource list per pool.
pub mod shape_c {
    include!(concat!(env!("OUT_DIR"), "/shape_c/_.rs"));

    /// Encoded `FileDescriptorSet` of this shape, for gRPC server reflection.
    pub const FILE_DESCRIPTOR_SET: &[u8] =
        include_bytes!(concat!(env!("OUT_DIR"), "/shape_c/descriptor.bin"));
}

/// The fully-qualified gRPC service name shared by every shape.
pub const SERVICE_NAME: &str = "resource_reader";

#[cfg(test)]
mod wire_tests;
