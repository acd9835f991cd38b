//! Integration tests: models.
