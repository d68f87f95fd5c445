//! The engine: workers, pacing and stopping. Protocol code lives in `proto`, measurements in
//! `stats`; the engine only decides when things happen and who records them.

pub mod http;
pub mod pacer;
pub mod timer;
pub mod vu;
