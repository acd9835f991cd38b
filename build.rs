//! Generates the Triton gRPC client and server code from `proto/` with a vendored
//! `protoc`, so that a fresh machine needs no system protobuf compiler.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // SAFETY-free: build scripts are single-threaded; tonic-prost-build reads PROTOC.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(
            &["proto/grpc_service.proto", "proto/model_config.proto"],
            &["proto"],
        )?;
    Ok(())
}
