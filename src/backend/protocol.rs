//! Which of the Open Inference Protocol's two forms a client speaks.

/// Which of Triton's two protocols a client speaks (perf_analyzer's `-i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// KServe v2 over gRPC (Triton's port 8001 by default).
    #[default]
    Grpc,
    /// KServe v2 over HTTP/REST (port 8000), with Triton's binary tensor data
    /// extension when the server has it.
    Http,
}

impl Protocol {
    /// The name `--protocol` takes, and reports print.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::Http => "http",
        }
    }

    /// Triton's default port for the protocol, used when a URL names none.
    pub fn default_port(self) -> u16 {
        match self {
            Protocol::Grpc => 8001,
            Protocol::Http => 8000,
        }
    }
}
