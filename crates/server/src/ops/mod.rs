//! Running the server as a process: listening, loading the model behind the listener,
//! draining on SIGTERM, liveness and readiness probes, and the scale-out signal.

pub mod lifecycle;
mod readiness;
pub mod scale_out;
pub mod serving;
