//! Generates the Triton gRPC client and server code from `proto/` with a vendored
//! `protoc`, so that a fresh machine needs no system protobuf compiler.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let protoc = protoc_bin_vendored::protoc_bin_path()?;
    // Build scripts are single-threaded, so setting the variable is sound.
    unsafe { std::env::set_var("PROTOC", protoc) };
    println!("cargo:rerun-if-changed=proto");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Raw tensor bytes as `bytes::Bytes`: decoding a response slices the receive
        // buffer instead of copying each tensor.
        .bytes(".inference.ModelInferRequest.raw_input_contents")
        .bytes(".inference.ModelInferResponse.raw_output_contents")
        .compile_protos(
            &["proto/grpc_service.proto", "proto/model_config.proto"],
            &["proto"],
        )?;
    Ok(())
}
