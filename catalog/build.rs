// The web UI is embedded at compile time: rebuild when any of its files
// (including new ones) change.
fn main() {
    println!("cargo:rerun-if-changed=../webui");
}
