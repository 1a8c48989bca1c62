//! Compiles each wire shape on its own: the three files share message names
//! (`ResourceList`, `ClusterIdentity`, `Empty`) in the same empty package, so
//! they cannot live in one descriptor set. protox parses them in-process, so
//! no system `protoc` is needed.

use std::path::PathBuf;

use prost::Message;

const K8S_QUANTITY: &str = "k8s.io/apimachinery/pkg/api/resource/generated.proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed=proto");

    // The Kubernetes Quantity message, shared by shapes B and C.
    let k8s_out = out.join("k8s");
    std::fs::create_dir_all(&k8s_out)?;
    let fds = protox::compile([K8S_QUANTITY], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .out_dir(&k8s_out)
        .compile_fds(fds)?;

    for shape in ["shape_a", "shape_b", "shape_c"] {
        let shape_out = out.join(shape);
        std::fs::create_dir_all(&shape_out)?;
        let fds = protox::compile([format!("{shape}/resource_reader.proto")], ["proto"])?;
        // Kept for gRPC server reflection, so `grpcurl` works without the files.
        std::fs::write(shape_out.join("descriptor.bin"), fds.encode_to_vec())?;
        tonic_prost_build::configure()
            .out_dir(&shape_out)
            .extern_path(".k8s.io.apimachinery.pkg.api.resource", "crate::k8s")
            .compile_fds(fds)?;
    }
    Ok(())
}
