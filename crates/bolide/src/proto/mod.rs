//! Wire protocols spoken by virtual users and connections.

pub mod ddp;
pub mod http;
pub mod read;
pub mod xhr;
