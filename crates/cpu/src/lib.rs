//! ferrite CPU backend.
