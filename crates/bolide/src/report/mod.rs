//! Reports read result documents and write text; one file per output format.

pub mod charts;
pub mod ddp;
pub mod html;
pub mod progress;
pub mod svg;
pub mod table;
pub mod term;
