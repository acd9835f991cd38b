//! bertqa's one integration-test binary. Tests that need a server start the real local
//! Triton themselves (free ports, one server per test binary) and never skip.

mod architecture;
mod client_errors;
mod common;
mod compare;
mod data_formats;
mod decode;
mod eval;
mod families;
mod features;
mod fuzz;
mod gateways;
mod help;
mod html_reports;
mod http;
mod http_commands;
mod http_tls;
mod library;
mod merge;
mod metrics;
mod models;
mod oip_servers;
mod perf;
mod perf_budget;
mod perf_text;
mod pipeline;
mod reliability;
mod resume;
mod score;
mod security;
mod shared_memory;
mod slices;
mod testbed;
mod text_models;
mod tune;
