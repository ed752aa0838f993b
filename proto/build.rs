//! Generates the gRPC code from `proto/*.proto` with `protox` (a pure-Rust protobuf compiler): no system
//! `protoc` is needed, and nothing is downloaded.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/safekeeper.proto", "proto/pageserver.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={file}");
    }
    let descriptors = protox::compile(files, ["proto"])?;
    // `bytes` fields become `bytes::Bytes`, so WAL moves through the service without copies.
    tonic_prost_build::configure().bytes(".").compile_fds(descriptors)?;
    Ok(())
}
