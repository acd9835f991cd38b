//! Integration tests: score.
