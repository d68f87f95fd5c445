//! What a report says, as blocks: headings, lines, verdicts and tables. The same blocks are
//! written as text for the terminal, as Markdown for `--format md` and PR comments, and carried to
//! the HTML page as data, where tables are HTML tables with their cells' tones as colours.

use serde::Serialize;

use super::table::{md_text, Table, Tone};

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Block {
    Heading {
        level: usize,
        text: String,
    },
    /// A paragraph.
    Text {
        text: String,
    },
    /// Lines one under the other (notes), then a blank line.
    Lines {
        lines: Vec<String>,
    },
    /// A bulleted list.
    List {
        items: Vec<String>,
    },
    /// A verdict: `head` strong (`**Regression gate: FAILED**` in Markdown), then `rest`.
    Verdict {
        head: String,
        rest: String,
        #[serde(skip_serializing_if = "Tone::is_plain")]
        tone: Tone,
    },
    Table {
        table: Table,
    },
}

impl Block {
    pub fn heading(level: usize, text: impl Into<String>) -> Block {
        Block::Heading { level, text: text.into() }
    }

    pub fn text(text: impl Into<String>) -> Block {
        Block::Text { text: text.into() }
    }

    pub fn table(table: Table) -> Block {
        Block::Table { table }
    }
}

/// The blocks as text: Markdown (headings with `#`, what users named escaped) for `md`, plain
/// titles for the terminal.
pub fn render(blocks: &[Block], md: bool) -> String {
    let esc = |text: &str| if md { md_text(text) } else { text.to_string() };
    let mut out = String::new();
    for b in blocks {
        match b {
            Block::Heading { level, text } if md => {
                out.push_str(&format!("{} {}\n\n", "#".repeat(*level), md_text(text)))
            }
            Block::Heading { text, .. } => out.push_str(&format!("{text}\n\n")),
            Block::Text { text } => out.push_str(&format!("{}\n\n", esc(text))),
            Block::Lines { lines } => {
                for l in lines {
                    out.push_str(&esc(l));
                    out.push('\n');
                }
                out.push('\n');
            }
            Block::List { items } => {
                for i in items {
                    out.push_str(&format!("- {}\n", esc(i)));
                }
                out.push('\n');
            }
            Block::Verdict { head, rest, .. } if md => {
                out.push_str(&format!("**{}**{}\n\n", md_text(head), md_text(rest)))
            }
            Block::Verdict { head, rest, .. } => out.push_str(&format!("{head}{rest}\n\n")),
            Block::Table { table } => {
                out.push_str(&table.clone().for_markdown(md).markdown());
                out.push('\n');
            }
        }
    }
    out
}
