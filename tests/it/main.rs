//! bertqa's one integration-test binary. Tests that need a server start the real local
//! Triton themselves (free ports, one server per test binary) and never skip.

mod common;
mod decode;
mod features;
mod models;
mod score;
