//! What every result document carries, whatever its workload, declared once: the header
//! (`format`, `version`, `tool`, `kind`, the command line, the start, whether it was interrupted,
//! the host) before the workload's own fields, and the run's surroundings (the watched processes,
//! the scraped series, the outputs, bolide's own load, the label, the merge record, the
//! thresholds) after them. `schema/envelope.schema.json` describes the same fields; both
//! documents' schemas refer to it.
//!
//! A document is declared with [`result_document!`], which lays the envelope's fields around the
//! workload's in one plain struct: its JSON is the fields in that order (no `serde(flatten)`,
//! which would buffer a whole document while reading it), and [`Enveloped`] reaches the
//! envelope's fields of any document. A field every document carries is added here (and in the
//! schema), nowhere else.

use serde::{Deserialize, Serialize};

use crate::monitor::generator::GeneratorResult;
use crate::monitor::scrape::ScrapeResult;
use crate::monitor::MonitorResult;
use crate::threshold::ThresholdResult;

/// Value of the `format` field.
pub const FORMAT: &str = "bolide.result";
/// Version of the document layout; bumped on any incompatible change. Version 4: an HTTP run's
/// `errors` (and `errors_by_class.status`) count responses of a status not expected
/// (`settings.expect_status`); up to version 3 such responses were not errors.
pub const VERSION: u32 = 4;
/// The oldest format version this bolide still reads. Version 2 added `latency_p90_us` to the
/// timeline's seconds and `generator.dashboard_cpu_pct`; in version 1 documents they read as
/// absent (p90 charts then say so). Version 3 moved a DDP run's `summary.ensure` verdicts into
/// `thresholds` (both kinds, with `--threshold`); older documents' ensure verdicts are not read.
pub const OLDEST_VERSION: u32 = 1;

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Host {
    pub cores: usize,
    pub os: String,
    pub arch: String,
    pub kernel: String,
}

/// An output in a result document: where it went and how delivery went.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct OutputResult {
    /// `prometheus-rw` or `otlp`.
    pub kind: String,
    /// The receiver's URL (without credentials).
    pub url: String,
    /// The `testid` label (resource attribute for OTLP) of every series.
    pub testid: String,
    /// Seconds of the run handed to the output, sent (answered 2xx), and dropped (the queue full,
    /// every try failed, or refused by the receiver).
    pub seconds: u64,
    pub sent: u64,
    pub dropped: u64,
    /// Tries made again after a failure.
    pub retried: u64,
    /// Samples (a counter's value or a histogram each) in the requests sent.
    pub samples_sent: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
}

/// The envelope of a document, borrowed.
#[derive(Debug, Clone, Copy)]
pub struct Envelope<'a> {
    pub format: &'a str,
    pub version: u32,
    pub tool: &'a Tool,
    /// `"http"` or `"ddp"`.
    pub kind: &'a str,
    pub command_line: &'a [String],
    pub started_at: &'a str,
    pub interrupted: bool,
    pub host: &'a Host,
    pub monitor: &'a [MonitorResult],
    pub scrape: &'a [ScrapeResult],
    pub outputs: &'a [OutputResult],
    pub generator: Option<&'a GeneratorResult>,
    pub label: Option<&'a str>,
    pub merged: Option<&'a super::merge_info::MergeInfo>,
    pub thresholds: &'a [ThresholdResult],
}

/// The envelope of a document, to fill in: what the run's surroundings add once the workload's
/// part is made.
#[derive(Debug)]
pub struct EnvelopeMut<'a> {
    pub command_line: &'a mut Vec<String>,
    pub started_at: &'a mut String,
    pub interrupted: &'a mut bool,
    pub monitor: &'a mut Vec<MonitorResult>,
    pub scrape: &'a mut Vec<ScrapeResult>,
    pub outputs: &'a mut Vec<OutputResult>,
    pub generator: &'a mut Option<GeneratorResult>,
    pub label: &'a mut Option<String>,
    pub merged: &'a mut Option<super::merge_info::MergeInfo>,
    pub thresholds: &'a mut Vec<ThresholdResult>,
}

/// A result document: its envelope, whatever its workload.
pub trait Enveloped {
    fn envelope(&self) -> Envelope<'_>;
    fn envelope_mut(&mut self) -> EnvelopeMut<'_>;
    /// Writes the header of a run's document: this format and version, this bolide, the workload's
    /// `kind`, the command line, when the run started, whether it was interrupted, this machine.
    fn stamp(&mut self, kind: &str, command_line: Vec<String>, started_at: std::time::SystemTime, interrupted: bool);
}

/// Facts about this machine for the result document.
pub fn host() -> Host {
    Host {
        cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease").map(|s| s.trim().to_string()).unwrap_or_default(),
    }
}

/// Declares a result document: `format`, `version`, `tool`, `kind`, `command_line`, `started_at`,
/// `interrupted` and `host` first, then the fields given, then `monitor`, `scrape`, `outputs`,
/// `generator`, `label`, `merged` and `thresholds` (each of these absent from the JSON when
/// empty); and its [`Enveloped`].
macro_rules! result_document {
    ($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
        pub struct $name {
            /// Always `bolide.result`.
            pub format: String,
            pub version: u32,
            pub tool: $crate::stats::envelope::Tool,
            /// Which workload produced it: `"http"` or `"ddp"`.
            pub kind: String,
            /// The command line as typed, program name first (secrets redacted).
            pub command_line: Vec<String>,
            /// Wall-clock start, RFC 3339 UTC.
            pub started_at: String,
            /// True when Ctrl-C stopped the run early; the numbers cover what was done.
            pub interrupted: bool,
            pub host: $crate::stats::envelope::Host,
            $($(#[$fmeta])* pub $field: $ty,)*
            /// Server processes watched with `--monitor` (absent when none).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub monitor: Vec<$crate::monitor::MonitorResult>,
            /// Prometheus endpoints read with `--scrape` (absent when none).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub scrape: Vec<$crate::monitor::scrape::ScrapeResult>,
            /// Where the run's seconds were sent (`--out prometheus-rw=URL`, `--out otlp=URL`) and
            /// how delivery went.
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub outputs: Vec<$crate::stats::envelope::OutputResult>,
            /// bolide's own load threads and the machine's idle CPU, with the verdict on whether the
            /// run measured the server or the tool.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub generator: Option<$crate::monitor::generator::GeneratorResult>,
            /// The name `bolide bench` runs were given (`--label`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub label: Option<String>,
            /// Set on a document `bolide merge` made of segments' documents: which, and what was
            /// wrong.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub merged: Option<$crate::stats::merge_info::MergeInfo>,
            /// Every threshold (`--threshold`, a scenario's `ensure`), its value and its verdict; a
            /// broken one made the exit code 1 (absent when none was set).
            #[serde(default, skip_serializing_if = "Vec::is_empty")]
            pub thresholds: Vec<$crate::threshold::ThresholdResult>,
        }

        impl $crate::stats::envelope::Enveloped for $name {
            fn envelope(&self) -> $crate::stats::envelope::Envelope<'_> {
                $crate::stats::envelope::Envelope {
                    format: &self.format,
                    version: self.version,
                    tool: &self.tool,
                    kind: &self.kind,
                    command_line: &self.command_line,
                    started_at: &self.started_at,
                    interrupted: self.interrupted,
                    host: &self.host,
                    monitor: &self.monitor,
                    scrape: &self.scrape,
                    outputs: &self.outputs,
                    generator: self.generator.as_ref(),
                    label: self.label.as_deref(),
                    merged: self.merged.as_ref(),
                    thresholds: &self.thresholds,
                }
            }

            fn envelope_mut(&mut self) -> $crate::stats::envelope::EnvelopeMut<'_> {
                $crate::stats::envelope::EnvelopeMut {
                    command_line: &mut self.command_line,
                    started_at: &mut self.started_at,
                    interrupted: &mut self.interrupted,
                    monitor: &mut self.monitor,
                    scrape: &mut self.scrape,
                    outputs: &mut self.outputs,
                    generator: &mut self.generator,
                    label: &mut self.label,
                    merged: &mut self.merged,
                    thresholds: &mut self.thresholds,
                }
            }

            fn stamp(
                &mut self,
                kind: &str,
                command_line: Vec<String>,
                started_at: std::time::SystemTime,
                interrupted: bool,
            ) {
                self.format = $crate::stats::envelope::FORMAT.to_string();
                self.version = $crate::stats::envelope::VERSION;
                self.tool =
                    $crate::stats::envelope::Tool { name: "bolide".into(), version: env!("CARGO_PKG_VERSION").into() };
                self.kind = kind.to_string();
                self.command_line = command_line;
                self.started_at = humantime::format_rfc3339_millis(started_at).to_string();
                self.interrupted = interrupted;
                self.host = $crate::stats::envelope::host();
            }
        }
    };
}

pub(crate) use result_document;
