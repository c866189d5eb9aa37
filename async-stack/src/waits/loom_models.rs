//! Loom models of the wait-edge protocol.
