//! Integration tests live in `tests/`; this package has no library code.
