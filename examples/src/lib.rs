//! Examples live in `examples/`; this package has no library code.
