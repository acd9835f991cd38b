//! What the integration tests share.

#![allow(dead_code)]

pub mod tls_proxy;
mod triton;

pub use triton::*;
