//! The record a merged document keeps of its making (`merged`): which segments, from where, each
//! one's generator verdict, and what was missing or doubled. Its own file so that the documents
//! (`result.rs`, `vu.rs`) can hold it without reaching into the merge itself.

use serde::{Deserialize, Serialize};

use crate::monitor::generator::GeneratorResult;

/// How a merged document was made: from which segments, and what was wrong with the set.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct MergeInfo {
    /// N, the plan's segment count.
    pub segments_planned: u32,
    /// Each document merged, in segment order.
    pub segments: Vec<SegmentInfo>,
    /// Segments of 1..N no document was given for: the merge covers less than the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<u32>,
    /// Segments given more than once: the first was merged, the others left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicated: Vec<u32>,
    /// What a reader should know (missing, duplicated, late or interrupted segments).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One segment's document in a merge.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct SegmentInfo {
    pub index: u32,
    /// Where the document came from (its file).
    pub source: String,
    pub started_at: String,
    /// Its start after the earliest segment's, seconds; its timeline was moved by this, rounded.
    pub offset_s: f64,
    pub interrupted: bool,
    /// The machine's cores and bolide's load threads there.
    pub cores: usize,
    pub threads: usize,
    /// That instance's generator verdict (why it may have measured itself), as it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator: Option<GeneratorResult>,
}
