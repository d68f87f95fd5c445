//! One chart as a static SVG image (`bolide report --format svg`, and the images of a Markdown
//! report written to a file): axes with round ticks, the series in the HTML report's colours, a
//! legend, and the reason instead of a frame when there is nothing to draw. Plain text, no script,
//! no font or anything else to fetch, so it shows the same in a README, a PR or a browser.

use std::fmt::Write;

use super::charts::{Chart, Style, XKind};

/// Okabe-Ito, as the HTML report (told apart with common colour-vision deficiencies).
const PALETTE: [&str; 8] = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442"];
const WIDTH: f64 = 720.0;
const HEIGHT: f64 = 320.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 32.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 76.0;
/// Room under the axis for slanted names (steps, labels).
const BOTTOM_NAMED: f64 = 150.0;
/// Names longer than this are cut (with an ellipsis) under the axis.
const NAME_CHARS: usize = 28;

/// Where a value lands on an axis.
struct Axis {
    lo: f64,
    hi: f64,
    log: bool,
    from: f64,
    to: f64,
}

impl Axis {
    fn at(&self, v: f64) -> f64 {
        let (v, lo, hi) =
            if self.log { (v.max(1e-9).log10(), self.lo.log10(), self.hi.log10()) } else { (v, self.lo, self.hi) };
        let span = if hi > lo { hi - lo } else { 1.0 };
        self.from + (v - lo) / span * (self.to - self.from)
    }
}

/// Round tick values from lo to hi: steps of 1, 2 or 5 times a power of ten, about `n` of them.
/// With `cover`, the first and last ticks are at or beyond lo and hi (for a value axis).
fn ticks(lo: f64, hi: f64, n: usize, cover: bool) -> Vec<f64> {
    if hi <= lo || !(hi - lo).is_finite() {
        return vec![lo];
    }
    let raw = (hi - lo) / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    let mut out = Vec::new();
    let (first, last) =
        if cover { ((lo / step).floor() * step, (hi / step).ceil() * step) } else { ((lo / step).ceil() * step, hi) };
    let mut v = first;
    while v <= last + step * 1e-9 {
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

/// A tick's text: as few digits as the step needs.
fn tick_text(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{:.1}M", v / 1e6).replace(".0M", "M")
    } else if a >= 1e4 {
        format!("{:.0}k", v / 1e3)
    } else if a >= 10.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

/// x = 1 / (1 - q) as a percentile: 2 -> "50%", 1000 -> "99.9%".
fn percentile_text(x: f64) -> String {
    if x <= 1.0 {
        return "0%".into();
    }
    let p = 100.0 * (1.0 - 1.0 / x);
    let digits = (x.log10().ceil() as i32 - 2).clamp(0, 4) as usize;
    format!("{p:.digits$}%")
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The chart as a complete SVG document: its title, then its axes, series and legend, or the
/// reason there is nothing to draw.
pub fn chart(c: &Chart) -> String {
    let mut out = String::with_capacity(16_384);
    let full = if c.x_kind == XKind::Label && c.empty.is_none() { HEIGHT - BOTTOM + BOTTOM_NAMED } else { HEIGHT };
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{full}\" viewBox=\"0 0 {WIDTH} {full}\" \
         font-family=\"Helvetica, Arial, sans-serif\" font-size=\"11\">\n\
         <title>{}</title>\n<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n\
         <text x=\"{LEFT}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>\n",
        escape(&c.title),
        escape(&c.title)
    );
    let values: Vec<f64> = c.series.iter().flat_map(|s| s.values.iter().flatten().copied()).collect();
    if let Some(why) = &c.empty {
        let _ = writeln!(
            out,
            "<text x=\"{LEFT}\" y=\"{}\" fill=\"#666666\">No data: {}.</text>",
            HEIGHT / 2.0,
            escape(why)
        );
        out.push_str("</svg>\n");
        return out;
    }
    if values.is_empty() || c.x.is_empty() {
        let _ = writeln!(out, "<text x=\"{LEFT}\" y=\"{}\" fill=\"#666666\">No data.</text>", HEIGHT / 2.0);
        out.push_str("</svg>\n");
        return out;
    }
    let plot = Plot::of(c, &values);
    plot.y_grid(&mut out);
    plot.x_ticks(&mut out, c);
    plot.axis_labels(&mut out, c);
    plot.series(&mut out, c);
    plot.legend(&mut out, c);
    out.push_str("</svg>\n");
    out
}

/// The top, bottom and right edges of the plot area.
const PLOT_TOP: f64 = TOP;
const PLOT_BOTTOM: f64 = HEIGHT - BOTTOM;
const PLOT_RIGHT: f64 = WIDTH - RIGHT;

/// A chart's axes, fitted to its values, and the image's height (taller with names under the axis).
struct Plot {
    x: Axis,
    y: Axis,
    y_ticks: Vec<f64>,
    /// Names under the x axis (slanted), not numbers.
    named: bool,
    height: f64,
}

impl Plot {
    fn of(c: &Chart, values: &[f64]) -> Plot {
        let named = c.x_kind == XKind::Label;
        let height = if named { HEIGHT - BOTTOM + BOTTOM_NAMED } else { HEIGHT };
        // y from zero (or below, for negative values) to a little above the highest value.
        let y_hi = values.iter().copied().fold(f64::MIN, f64::max);
        let y_lo = values.iter().copied().fold(0.0, f64::min);
        let y_ticks = ticks(y_lo, if y_hi > y_lo { y_hi } else { y_lo + 1.0 }, 5, true);
        let y = Axis {
            lo: y_ticks[0].min(y_lo),
            hi: y_ticks.last().copied().unwrap_or(1.0).max(y_hi),
            log: false,
            from: PLOT_BOTTOM,
            to: PLOT_TOP,
        };
        let x_lo = c.x.iter().copied().fold(f64::MAX, f64::min);
        let x_hi = c.x.iter().copied().fold(f64::MIN, f64::max);
        let padded = matches!(c.x_kind, XKind::Run | XKind::Label);
        let x = match c.x_kind {
            XKind::Percentile => Axis { lo: 1.0, hi: x_hi.max(10.0), log: true, from: LEFT, to: PLOT_RIGHT },
            _ if padded => Axis { lo: x_lo - 0.5, hi: x_hi + 0.5, log: false, from: LEFT, to: PLOT_RIGHT },
            _ => Axis {
                lo: x_lo,
                hi: if x_hi > x_lo { x_hi } else { x_lo + 1.0 },
                log: false,
                from: LEFT,
                to: PLOT_RIGHT,
            },
        };
        Plot { x, y, y_ticks, named, height }
    }

    /// Grid and y ticks.
    fn y_grid(&self, out: &mut String) {
        for t in &self.y_ticks {
            let py = self.y.at(*t);
            let _ = writeln!(
                out,
                "<line x1=\"{LEFT}\" y1=\"{py:.1}\" x2=\"{PLOT_RIGHT}\" y2=\"{py:.1}\" stroke=\"#e5e5e5\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                LEFT - 6.0,
                py + 4.0,
                tick_text(*t)
            );
        }
    }

    /// x ticks: percentiles, names, or round numbers.
    fn x_ticks(&self, out: &mut String, c: &Chart) {
        let x = &self.x;
        let x_ticks: Vec<(f64, String)> = match c.x_kind {
            XKind::Percentile => [1.0, 2.0, 10.0, 100.0, 1e3, 1e4, 1e5]
                .iter()
                .filter(|v| **v <= x.hi)
                .map(|v| (*v, percentile_text(*v)))
                .collect(),
            XKind::Label => c.x.iter().zip(&c.x_names).map(|(v, n)| (*v, n.clone())).collect(),
            XKind::Run | XKind::Level if c.x.len() <= 12 => c.x.iter().map(|v| (*v, tick_text(*v))).collect(),
            _ => ticks(x.lo, x.hi, 8, false).into_iter().map(|v| (v, tick_text(v))).collect(),
        };
        for (v, text) in &x_ticks {
            let px = x.at(*v);
            let _ = writeln!(
                out,
                "<line x1=\"{px:.1}\" y1=\"{PLOT_BOTTOM}\" x2=\"{px:.1}\" y2=\"{}\" stroke=\"#999999\"/>",
                PLOT_BOTTOM + 4.0
            );
            if self.named {
                // Names slant down to the left of their tick, so that long ones do not overlap.
                let name = if text.chars().count() > NAME_CHARS {
                    format!("{}…", text.chars().take(NAME_CHARS - 1).collect::<String>())
                } else {
                    text.clone()
                };
                let ty = PLOT_BOTTOM + 14.0;
                let _ = writeln!(
                    out,
                    "<text x=\"{px:.1}\" y=\"{ty:.1}\" text-anchor=\"end\" transform=\"rotate(-35 {px:.1} {ty:.1})\">{}</text>",
                    escape(&name)
                );
            } else {
                let _ = writeln!(
                    out,
                    "<text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                    PLOT_BOTTOM + 16.0,
                    escape(text)
                );
            }
        }
    }

    /// The x axis's line, and both axes' labels.
    fn axis_labels(&self, out: &mut String, c: &Chart) {
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" y1=\"{PLOT_BOTTOM}\" x2=\"{PLOT_RIGHT}\" y2=\"{PLOT_BOTTOM}\" stroke=\"#999999\"/>\n\
             <text x=\"{:.1}\" y=\"{}\" text-anchor=\"middle\" fill=\"#444444\">{}</text>\n\
             <text transform=\"translate(14 {:.1}) rotate(-90)\" text-anchor=\"middle\" fill=\"#444444\">{}</text>",
            (LEFT + PLOT_RIGHT) / 2.0,
            if self.named { self.height - 40.0 } else { PLOT_BOTTOM + 32.0 },
            escape(&c.x_label),
            (PLOT_TOP + PLOT_BOTTOM) / 2.0,
            escape(&c.y_label)
        );
    }

    /// The series: lines broken where a value is missing (joined across gaps for spectra, whose
    /// series have values only at their own percentiles), or marks.
    fn series(&self, out: &mut String, c: &Chart) {
        let (x, y) = (&self.x, &self.y);
        for (i, s) in c.series.iter().enumerate() {
            let colour = c.colours.get(i).map_or(PALETTE[i % PALETTE.len()], String::as_str);
            let points: Vec<Option<(f64, f64)>> =
                c.x.iter().zip(&s.values).map(|(xv, v)| v.map(|v| (x.at(*xv), y.at(v)))).collect();
            match s.style {
                Style::Points => {
                    for (px, py) in points.iter().flatten() {
                        let _ = writeln!(out, "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"3\" fill=\"{colour}\"/>");
                    }
                }
                Style::Dots => dots(out, &points, colour),
                Style::Bars => {
                    let slot = if c.x.len() > 1 { (x.at(c.x[1]) - x.at(c.x[0])).abs() } else { PLOT_RIGHT - LEFT };
                    let w = (slot * 0.6).min(80.0);
                    let base = y.at(0.0);
                    for (px, py) in points.iter().flatten() {
                        let _ = writeln!(
                            out,
                            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{colour}\"/>",
                            px - w / 2.0,
                            py.min(base),
                            (base - py).abs()
                        );
                    }
                }
                Style::Line => line(out, &points, c.x_kind == XKind::Percentile, colour),
            }
        }
    }

    /// The legend, in rows under the axis label.
    fn legend(&self, out: &mut String, c: &Chart) {
        let (mut lx, mut ly) = (LEFT, self.height - 20.0);
        for (i, s) in c.series.iter().enumerate() {
            let colour = c.colours.get(i).map_or(PALETTE[i % PALETTE.len()], String::as_str);
            let w = 22.0 + 6.5 * s.label.chars().count() as f64;
            if lx + w > PLOT_RIGHT && lx > LEFT {
                lx = LEFT;
                ly += 14.0;
            }
            let _ = writeln!(
                out,
                "<rect x=\"{lx:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{colour}\"/>\
                 <text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
                ly - 9.0,
                lx + 14.0,
                escape(&s.label)
            );
            lx += w;
        }
    }
}

/// Thousands of marks: one per pixel they land on, in one path of tiny squares.
fn dots(out: &mut String, points: &[Option<(f64, f64)>], colour: &str) {
    let mut seen = std::collections::HashSet::new();
    let mut path = String::new();
    for (px, py) in points.iter().flatten() {
        let (px, py) = (px.round() as i64, py.round() as i64);
        if seen.insert((px, py)) {
            let _ = write!(path, "M{px} {py}h1.6v1.6h-1.6z");
        }
    }
    let _ = writeln!(out, "<path fill=\"{colour}\" fill-opacity=\"0.6\" d=\"{path}\"/>");
}

/// A line through the points, broken where one is missing unless `join`; a lone point a dot.
fn line(out: &mut String, points: &[Option<(f64, f64)>], join: bool, colour: &str) {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for p in points {
        match p {
            Some(p) => runs.last_mut().expect("one run at least").push(*p),
            None if !join => runs.push(Vec::new()),
            None => {}
        }
    }
    for run in runs.iter().filter(|r| !r.is_empty()) {
        if run.len() == 1 {
            let _ = writeln!(out, "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\" fill=\"{colour}\"/>", run[0].0, run[0].1);
            continue;
        }
        let path: Vec<String> = run.iter().map(|(px, py)| format!("{px:.1},{py:.1}")).collect();
        let _ = writeln!(
            out,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"1.5\" points=\"{}\"/>",
            path.join(" ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_ticks_and_percentiles() {
        assert_eq!(ticks(0.0, 10.0, 5, false), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        // A value axis covers its highest value: 10.5 needs a tick above it.
        assert_eq!(ticks(0.0, 10.5, 5, false), vec![0.0, 5.0, 10.0]);
        assert_eq!(ticks(0.0, 10.5, 5, true), vec![0.0, 5.0, 10.0, 15.0]);
        let text: Vec<String> = ticks(0.0, 0.8, 4, false).into_iter().map(tick_text).collect();
        assert_eq!(text, ["0", "0.2", "0.4", "0.6", "0.8"]);
        assert_eq!(tick_text(12_000.0), "12k");
        assert_eq!(tick_text(0.25), "0.25");
        assert_eq!(percentile_text(2.0), "50%");
        assert_eq!(percentile_text(1000.0), "99.9%");
        assert_eq!(percentile_text(100_000.0), "99.999%");
    }
}
