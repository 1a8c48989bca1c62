//! The compiler's version for `<binary>_build_info` (`edge::metrics`): cargo
//! names the compiler in `RUSTC` but puts its version in no variable, so it
//! is asked here, once per compiler (cargo reruns build scripts, and rebuilds
//! everything, when the compiler changes). The revision is not read here:
//! reading `.git` would rerun this on every commit and rebuild every crate
//! above `edge`; it comes from `LIQO_BROKER_REVISION` at build time instead
//! (`option_env!` in `src/metrics.rs`).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let version = Command::new(&rustc)
        .arg("-V")
        .output()
        .ok()
        .filter(|out| out.status.success())
        .and_then(|out| String::from_utf8(out.stdout).ok())
        // `rustc 1.95.0 (59807616e 2026-04-14)` -> `1.95.0`
        .and_then(|line| line.split_whitespace().nth(1).map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=EDGE_RUSTC_VERSION={version}");
}
