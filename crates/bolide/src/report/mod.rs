//! Reports read result documents and write text; one file per output format.

pub mod band;
pub mod blocks;
pub mod browser;
pub mod charts;
pub mod csv;
pub mod html;
pub mod http;
pub mod junit;
pub mod progress;
pub mod svg;
pub mod table;
pub mod term;
pub mod vu;

use crate::stats::doc::{Doc, Measures};

/// A workload's own report part (`http.rs`, `vu.rs`): what its documents show that another
/// workload's do not. Everything else a report shows reads the document's envelope and its
/// neutral view (`Doc::view`).
pub trait Shown {
    /// The terminal summary.
    fn summary(&self) -> String;
    /// What the run got through, in a table's cell: `1234.5 req/s`, `40 users`.
    fn throughput(&self) -> String;
    /// The summary band's name for the units of work that failed: `Errors`, `Step errors`.
    fn errors_label(&self) -> &'static str;
    /// The charts of the load itself, in the order a reader wants them.
    fn charts(&self) -> Vec<charts::Chart>;
    /// The summary band's figures of the load itself (throughput or users, latency, errors).
    fn facts(&self, m: &Measures, out: &mut Vec<band::Fact>);
    /// The live band's figures of the last whole second.
    fn live_facts(&self, out: &mut Vec<band::Fact>);
    /// The run's tables of the load itself.
    fn blocks(&self, out: &mut Vec<blocks::Block>);
    /// The load's per-second CSV rows: `row(t_s, metric, labels, value)`.
    fn csv_seconds(&self, row: &mut dyn FnMut(f64, &str, &str, f64));
}

/// A document's workload report part.
pub fn shown(doc: &Doc) -> &dyn Shown {
    match doc {
        Doc::Http(d) => &**d,
        Doc::Ddp(d) => &**d,
    }
}

/// The summary of a run of either kind, as the terminal shows it.
pub fn summary(doc: &Doc) -> String {
    shown(doc).summary()
}
