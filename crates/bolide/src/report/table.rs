//! Tables as the Meteor reports print them: Markdown with padded columns, readable as they are in
//! a terminal and pasted as they are into a report; and the reports' ways of writing a time, a
//! CPU share and an amount of memory.

use serde::Serialize;

/// What a cell, a line or a figure says about the result, for the HTML page's colours (always
/// with words beside them): better or passed, worse or failed, to be read with care, or nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tone {
    #[default]
    Plain,
    Good,
    Bad,
    Warn,
}

impl Tone {
    pub fn is_plain(&self) -> bool {
        *self == Tone::Plain
    }
}

/// A table: a header row and rows of cells; columns after the first are right-aligned when
/// `numeric` says so.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Table {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
    pub numeric: Vec<bool>,
    /// Each cell's tone (the HTML page colours it; text and Markdown leave it out); empty when
    /// every cell is plain, else one row of tones per row.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tones: Vec<Vec<Tone>>,
    /// Cells are text for a Markdown page (`--format md`, PR comments): escaped with
    /// [`md_text`]. Otherwise only a `|` is escaped, so that no cell splits the table.
    #[serde(skip)]
    pub for_markdown: bool,
}

impl Table {
    pub fn new(header: &[&str]) -> Table {
        Table {
            header: header.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
            numeric: Vec::new(),
            tones: Vec::new(),
            for_markdown: false,
        }
    }

    /// Gives cell (`row`, `col`) a tone.
    pub fn tone(&mut self, row: usize, col: usize, tone: Tone) {
        if tone.is_plain() {
            return;
        }
        let width = self.header.len();
        while self.tones.len() < self.rows.len() {
            self.tones.push(vec![Tone::Plain; width]);
        }
        if let Some(c) = self.tones.get_mut(row).and_then(|r| r.get_mut(col)) {
            *c = tone;
        }
    }

    /// Gives every cell of the last row added a tone (a suspect run, a failed level).
    pub fn tone_last_row(&mut self, tone: Tone) {
        let Some(row) = self.rows.len().checked_sub(1) else { return };
        for col in 0..self.header.len() {
            self.tone(row, col, tone);
        }
    }

    /// For a Markdown page (`md` true): every cell escaped as Markdown text.
    pub fn for_markdown(mut self, md: bool) -> Table {
        self.for_markdown = md;
        self
    }

    /// Marks columns (by index) as right-aligned.
    pub fn right(mut self, columns: &[usize]) -> Table {
        self.numeric = (0..self.header.len()).map(|i| columns.contains(&i)).collect();
        self
    }

    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Markdown, every column padded to its widest cell.
    pub fn markdown(&self) -> String {
        let cell = |c: &String| if self.for_markdown { md_text(c) } else { c.replace('|', "\\|") };
        let escaped = Table {
            header: self.header.iter().map(cell).collect(),
            rows: self.rows.iter().map(|r| r.iter().map(cell).collect()).collect(),
            numeric: self.numeric.clone(),
            tones: Vec::new(),
            for_markdown: false,
        };
        escaped.padded()
    }

    fn padded(&self) -> String {
        let n = self.header.len();
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.chars().count().max(3)).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(n) {
                widths[i] = widths[i].max(c.chars().count());
            }
        }
        let right = |i: usize| self.numeric.get(i).copied().unwrap_or(false);
        let line = |cells: &[String]| {
            let mut s = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let c = cells.get(i).map(String::as_str).unwrap_or("");
                let pad = w - c.chars().count();
                if right(i) {
                    s.push_str(&format!(" {}{c} |", " ".repeat(pad)));
                } else {
                    s.push_str(&format!(" {c}{} |", " ".repeat(pad)));
                }
            }
            s.push('\n');
            s
        };
        let mut out = line(&self.header);
        out.push('|');
        for (i, w) in widths.iter().enumerate() {
            if right(i) {
                out.push_str(&format!(" {}: |", "-".repeat(w - 1)));
            } else {
                out.push_str(&format!(" {} |", "-".repeat(*w)));
            }
        }
        out.push('\n');
        for r in &self.rows {
            out.push_str(&line(r));
        }
        out
    }
}

/// A duration as the reports write it: `2 minutes 6 seconds`, `1 minute 50 seconds`, `45 seconds`
/// (and `6.2 seconds` below ten seconds).
pub fn meteor_time(secs: f64) -> String {
    // Short runs keep their fractions (whole seconds would say "0 seconds").
    if secs < 0.1 {
        return format!("{:.3} seconds", secs.max(0.0));
    }
    if secs < 9.95 {
        return format!("{secs:.1} seconds");
    }
    let s = secs.round() as u64;
    let plural = |n: u64, unit: &str| if n == 1 { format!("1 {unit}") } else { format!("{n} {unit}s") };
    match (s / 60, s % 60) {
        (0, sec) => plural(sec, "second"),
        (min, 0) => plural(min, "minute"),
        (min, sec) => format!("{} {}", plural(min, "minute"), plural(sec, "second")),
    }
}

/// A CPU share as the reports write it: `43.67%`.
pub fn meteor_cpu(pct: f64) -> String {
    format!("{pct:.2}%")
}

/// Memory as the reports write it (decimal units, three significant digits): `451 MB`, `1.1 GB`.
pub fn meteor_bytes(bytes: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    if bytes < 1.0 {
        return "0 B".into();
    }
    let exp = ((bytes.log10() / 3.0).floor() as usize).min(UNITS.len() - 1);
    let v = bytes / 1000f64.powi(exp as i32);
    // Three significant digits, trailing zeros dropped.
    let digits = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    let text = format!("{v:.digits$}");
    let text = if text.contains('.') { text.trim_end_matches('0').trim_end_matches('.').to_string() } else { text };
    format!("{text} {}", UNITS[exp])
}

/// A latency in milliseconds, with sensible precision.
pub fn ms(v: f64) -> String {
    if v >= 1000.0 {
        format!("{} ms", crate::report::term::grouped(v, 0))
    } else if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 10.0 {
        format!("{v:.1} ms")
    } else {
        format!("{v:.2} ms")
    }
}

/// `+12.50%`-style change of `new` against `base`, in the reports' words: for a quantity where
/// less is better, "`12.50% less cpu`" / "`3.00% more cpu`", or "`same cpu`".
pub fn less_more(base: f64, new: f64, what: &str) -> String {
    match change_pct(base, new) {
        None => format!("no {what} to compare"),
        Some(c) if c.abs() < 0.005 => format!("same {what}"),
        Some(c) if c < 0.0 => format!("{:.2}% less {what}", -c),
        Some(c) if c > 100.0 => format!("{} {what}", times(c)),
        Some(c) => format!("{c:.2}% more {what}"),
    }
}

/// For a quantity where more is better (throughput): "`44.40% fewer requests/s`" / "`3.00% more
/// requests/s`" / "`same requests/s`".
pub fn more_fewer(base: f64, new: f64, what: &str) -> String {
    match change_pct(base, new) {
        None => format!("no {what} to compare"),
        Some(c) if c.abs() < 0.005 => format!("same {what}"),
        Some(c) if c < 0.0 => format!("{:.2}% fewer {what}", -c),
        Some(c) if c > 100.0 => format!("{} {what}", times(c)),
        Some(c) => format!("{c:.2}% more {what}"),
    }
}

/// "`29.21% faster`" / "`4.00% slower`" / "`same time`" from times (or times per unit of work).
pub fn faster_slower(base_s: f64, new_s: f64) -> String {
    match change_pct(base_s, new_s) {
        None => "no time to compare".into(),
        Some(c) if c.abs() < 0.005 => "same time".into(),
        Some(c) if c < 0.0 => format!("{:.2}% faster", -c),
        Some(c) if c > 100.0 => format!("{} slower", times(c)),
        Some(c) => format!("{c:.2}% slower"),
    }
}

/// Text for a Markdown page: no raw HTML (`<`, `>`, `&` as entities), no link, code span or
/// table cell break (`[`, `]`, backticks, `|` and `\` escaped), and a line break as a space, so
/// that what a user named (a label, a URL, a step) reads as they wrote it and cannot change the
/// page.
pub fn md_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\\' | '`' | '[' | ']' | '|' | '*' | '_' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A fenced code block of `text` whose fence is longer than any run of backticks inside it, so
/// that no line of the text can close it.
pub fn md_fence(info: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat(longest.max(2) + 1);
    let body = if text.ends_with('\n') { text.to_string() } else { format!("{text}\n") };
    format!("{fence}{info}\n{body}{fence}\n")
}

/// A rise of more than 100% as a factor: +886.95% is "9.9x" (the new value over the old).
fn times(change_pct: f64) -> String {
    let factor = 1.0 + change_pct / 100.0;
    if factor < 10.0 {
        format!("{factor:.1}x")
    } else {
        format!("{factor:.0}x")
    }
}

/// A signed change in percent, with the factor past +100%: "+12.50%", "-40.00%", "+886.95% (9.9x)".
pub fn signed_change(change_pct: f64) -> String {
    if change_pct > 100.0 {
        format!("{change_pct:+.2}% ({})", times(change_pct))
    } else {
        format!("{change_pct:+.2}%")
    }
}

/// Change of `new` against `base` in percent of `base`.
pub fn change_pct(base: f64, new: f64) -> Option<f64> {
    (base.is_finite() && new.is_finite() && base != 0.0).then(|| (new - base) * 100.0 / base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reports_ways_of_writing() {
        assert_eq!(meteor_time(126.0), "2 minutes 6 seconds");
        // Markdown: raw HTML, links and fences cannot get through.
        assert_eq!(
            md_text("<img src=x onerror=alert(1)> [a](javascript:x) `c` a|b"),
            "&lt;img src=x onerror=alert(1)&gt; \\[a\\](javascript:x) \\`c\\` a\\|b"
        );
        assert_eq!(md_fence("text", "a\n```\nb"), "````text\na\n```\nb\n````\n");
        assert_eq!(md_fence("", "plain\n"), "```\nplain\n```\n");
        let mut t = Table::new(&["Label", "n"]).for_markdown(true);
        t.row(vec!["<b>x</b>|y".into(), "1".into()]);
        assert!(t.markdown().contains("| &lt;b&gt;x&lt;/b&gt;\\|y |"), "{}", t.markdown());
        let mut t = Table::new(&["Label"]);
        t.row(vec!["a|b <c>".into()]);
        assert!(t.markdown().contains("| a\\|b <c> |"), "{}", t.markdown());
        // Past +100% a change reads as a factor, not as "886.95% more".
        assert_eq!(less_more(10.0, 98.695, "p99"), "9.9x p99");
        assert_eq!(less_more(10.0, 15.0, "p99"), "50.00% more p99");
        assert_eq!(faster_slower(1.0, 25.0), "25x slower");
        assert_eq!(more_fewer(100.0, 250.0, "requests/s"), "2.5x requests/s");
        assert_eq!(signed_change(886.95), "+886.95% (9.9x)");
        assert_eq!(signed_change(-12.5), "-12.50%");
        assert_eq!(meteor_time(110.4), "1 minute 50 seconds");
        assert_eq!(meteor_time(61.0), "1 minute 1 second");
        assert_eq!(meteor_time(120.0), "2 minutes");
        assert_eq!(meteor_time(44.6), "45 seconds");
        assert_eq!(meteor_time(6.24), "6.2 seconds");
        assert_eq!(meteor_time(0.018), "0.018 seconds");
        assert_eq!(meteor_bytes(451e6), "451 MB");
        assert_eq!(meteor_bytes(1.1e9), "1.1 GB");
        assert_eq!(meteor_bytes(13.6e6), "13.6 MB");
        assert_eq!(meteor_bytes(999.0), "999 B");
        assert_eq!(meteor_bytes(0.0), "0 B");
        assert_eq!(meteor_cpu(43.666), "43.67%");
        assert_eq!(faster_slower(178.0, 126.0), "29.21% faster");
        assert_eq!(faster_slower(100.0, 104.0), "4.00% slower");
        assert_eq!(faster_slower(100.0, 100.0), "same time");
        assert_eq!(less_more(85.89, 43.67, "cpu"), "49.16% less cpu");
        assert_eq!(less_more(109.39, 139.99, "cpu"), "27.97% more cpu");
        assert_eq!(less_more(0.0, 1.0, "ram"), "no ram to compare");
    }

    #[test]
    fn markdown_tables_are_padded() {
        let mut t = Table::new(&["# Run", "Time", "CPU"]).right(&[2]);
        t.row(vec!["1".into(), "2 minutes 6 seconds".into(), "43.67%".into()]);
        t.row(vec!["Mean".into(), "2 minutes".into(), "100.00%".into()]);
        assert_eq!(
            t.markdown(),
            "| # Run | Time                |     CPU |\n\
             | ----- | ------------------- | ------: |\n\
             | 1     | 2 minutes 6 seconds |  43.67% |\n\
             | Mean  | 2 minutes           | 100.00% |\n"
        );
    }
}
