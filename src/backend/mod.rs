//! The only stage that speaks gRPC: Triton's KServe v2 protocol (our own `proto/`),
//! a typed client, the BERT-QA tensor binding inferred from model metadata, and the
//! translation between our [`Feature`](crate::types::Feature) batches and raw tensors.

pub mod proto;
