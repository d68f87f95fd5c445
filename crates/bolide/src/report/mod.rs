//! Reports read result documents and write text; one file per output format.

pub mod band;
pub mod blocks;
pub mod charts;
pub mod csv;
pub mod ddp;
pub mod html;
pub mod junit;
pub mod progress;
pub mod svg;
pub mod table;
pub mod term;

/// The summary of a run of either kind, as the terminal shows it.
pub fn summary(doc: &crate::stats::doc::Doc) -> String {
    match doc {
        crate::stats::doc::Doc::Http(d) => term::summary(d),
        crate::stats::doc::Doc::Ddp(d) => ddp::summary(d),
    }
}
