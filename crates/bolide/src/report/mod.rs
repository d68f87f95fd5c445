//! Reports read result documents and write text; one file per output format.

pub mod ddp;
pub mod table;
pub mod term;
