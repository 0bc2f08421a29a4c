//! ferrite server.
