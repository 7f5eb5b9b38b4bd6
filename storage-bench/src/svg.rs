//! One SVG bar chart per measurement: a bar per backend and, beside it, its baseline, on a shared linear scale.
//!
//! Written by hand rather than with `plotters`: plotters lays text out with system font libraries (fontconfig,
//! freetype), which a fresh machine does not have, and these charts need nothing but rectangles and labels.

use std::fmt::Write as _;

use crate::report::Measurement;

const WIDTH: f64 = 720.0;
const LABEL: f64 = 150.0;
const BAR: f64 = 16.0;
const ROW: f64 = 44.0;
const TOP: f64 = 48.0;

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The chart of `measurement`.
pub fn chart(measurement: &Measurement) -> String {
    let largest = measurement
        .figures
        .iter()
        .flat_map(|figure| [figure.max, figure.baseline.unwrap_or(0.0)])
        .filter(|value| value.is_finite())
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let plot = WIDTH - LABEL - 90.0;
    let height = TOP + ROW * measurement.figures.len() as f64 + 30.0;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
    );
    let _ = write!(out, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = write!(
        out,
        r#"<text x="10" y="20" font-size="14" font-weight="bold">{}</text>"#,
        escape(&measurement.title)
    );
    let _ = write!(
        out,
        r##"<text x="10" y="38" fill="#555555">{} ({}; dark: backend median, light: baseline{})</text>"##,
        escape(&measurement.unit),
        if measurement.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        },
        measurement
            .baseline
            .as_deref()
            .map(|b| format!(" = {}", escape(b)))
            .unwrap_or_default()
    );
    for (row, figure) in measurement.figures.iter().enumerate() {
        let y = TOP + ROW * row as f64;
        let scale = |value: f64| {
            if value.is_finite() {
                value / largest * plot
            } else {
                0.0
            }
        };
        let _ = write!(
            out,
            r#"<text x="10" y="{:.1}">{}</text>"#,
            y + BAR,
            escape(&figure.backend)
        );
        let _ = write!(
            out,
            r##"<rect x="{LABEL}" y="{y:.1}" width="{:.1}" height="{BAR}" fill="#2b6cb0"/>"##,
            scale(figure.median)
        );
        // The min–max range as a whisker.
        let _ = write!(
            out,
            r##"<line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#1a365d" stroke-width="2"/>"##,
            LABEL + scale(figure.min),
            LABEL + scale(figure.max),
            y + BAR / 2.0,
            y + BAR / 2.0
        );
        let _ = write!(
            out,
            r#"<text x="{:.1}" y="{:.1}">{:.2}</text>"#,
            LABEL + scale(figure.median) + 6.0,
            y + BAR - 3.0,
            figure.median
        );
        if let Some(baseline) = figure.baseline {
            let _ = write!(
                out,
                r##"<rect x="{LABEL}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#a0aec0"/>"##,
                y + BAR + 2.0,
                scale(baseline),
                BAR / 2.0
            );
            let _ = write!(
                out,
                r##"<text x="{:.1}" y="{:.1}" fill="#555555" font-size="10">{:.2}</text>"##,
                LABEL + scale(baseline) + 6.0,
                y + BAR + 10.0,
                baseline
            );
        }
    }
    out.push_str("</svg>\n");
    out
}
