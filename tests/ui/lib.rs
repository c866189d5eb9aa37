//! The UI tests live in `macro_ui.rs`, their cases in `pass/` and `fail/`;
//! this package has no library code.
