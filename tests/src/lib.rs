//! Integration tests for memo live in `tests/tests/`.
