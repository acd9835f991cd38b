//! bertqa's one integration-test binary. Tests that need a server start the real local
//! Triton themselves (free ports, one server per test binary) and never skip.

mod architecture;
mod common;
mod compare;
mod decode;
mod eval;
mod fake;
mod features;
mod fuzz;
mod help;
mod http;
mod http_more;
mod merge;
mod models;
mod net;
mod perf;
mod pipeline;
mod resume;
mod score;
mod security;
mod shared_memory;
mod testbed;
mod tls_proxy;
