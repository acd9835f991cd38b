//! Integration tests: features.
