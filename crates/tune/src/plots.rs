//! The two pictures of a sweep (cargo feature `plots`): the
//! precision-recall curve and the histogram of cosines, each as PNG and
//! SVG; and the picture of `tune judge fit`: both same-request
//! judges' precision-recall curves on the held-out pairs.
//!
//! Text is drawn with DejaVu Sans (regular and bold), embedded in the
//! binary from the crates.io package `dejavu` 2.37.0 (its code MIT or
//! Apache-2.0; the fonts under the Bitstream Vera Fonts license, DejaVu's
//! changes in the public domain: free to embed and redistribute; the
//! notice is in `crates/tune/LICENSE-DejaVu-fonts`), and
//! registered with plotters' `ab_glyph` renderer: no system font is looked
//! up, so the PNGs look the same on every machine. The SVGs name the font
//! family `sans-serif` and leave it to the viewer.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::coord::types::{RangedCoordf64, RangedCoordu32};
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

use crate::error::{Result, TuneError};
use crate::judge_curve::{JudgeCurve, JudgeCurves};
use crate::pairs::Split;
use crate::report::{Choice, Mode, TuneReport};

/// The pictures' size in pixels.
const SIZE: (u32, u32) = (1000, 700);
/// The font family every text uses.
const FONT: &str = "sans-serif";

const CURVE: RGBColor = RGBColor(31, 119, 180);
const SAME: RGBColor = RGBColor(31, 119, 180);
const DIFFERENT: RGBColor = RGBColor(255, 127, 14);
const BEST: RGBColor = RGBColor(214, 39, 40);
const CONFIGURED: RGBColor = RGBColor(40, 40, 40);
const FLOOR: RGBColor = RGBColor(44, 160, 44);
const GRID: RGBColor = RGBColor(200, 200, 200);
/// The calibrated judge's curve, next to [`CURVE`] for the cosine judge.
const CALIBRATED: RGBColor = RGBColor(214, 39, 40);

/// Writes `pr_curve.png`, `pr_curve.svg`, `histogram.png` and
/// `histogram.svg` into `dir` (which must exist) and returns their paths.
pub fn write_plots(report: &TuneReport, dir: &Path) -> Result<Vec<PathBuf>> {
    fonts().map_err(|detail| TuneError::Plot {
        path: dir.to_path_buf(),
        detail,
    })?;
    let mut written = Vec::new();
    for (name, draw) in [
        ("pr_curve", pr_curve as Drawer),
        ("histogram", histogram as Drawer),
    ] {
        let png = dir.join(format!("{name}.png"));
        write_png(&png, |root| draw(report, root))?;
        written.push(png);
        let svg = dir.join(format!("{name}.svg"));
        write_svg(&svg, |root| draw(report, root))?;
        written.push(svg);
    }
    Ok(written)
}

/// Writes `judge_pr_curve.png` and `judge_pr_curve.svg` into `dir`
/// (which must exist): both judges' precision-recall curves, each with its
/// operating point. Returns their paths.
pub fn write_judge_plot(curves: &JudgeCurves, dir: &Path) -> Result<Vec<PathBuf>> {
    fonts().map_err(|detail| TuneError::Plot {
        path: dir.to_path_buf(),
        detail,
    })?;
    let png = dir.join("judge_pr_curve.png");
    write_png(&png, |area| match area {
        Area::Png(root) => draw_judge_curves(curves, root),
        Area::Svg(root) => draw_judge_curves(curves, root),
    })?;
    let svg = dir.join("judge_pr_curve.svg");
    write_svg(&svg, |area| match area {
        Area::Png(root) => draw_judge_curves(curves, root),
        Area::Svg(root) => draw_judge_curves(curves, root),
    })?;
    Ok(vec![png, svg])
}

/// The legend label of a judge's curve.
fn judge_label(curve: &JudgeCurve) -> String {
    match curve.judge {
        loopguard_semantic::JudgeKind::Cosine => "cosine judge (threshold over the cosine)".into(),
        loopguard_semantic::JudgeKind::Calibrated => {
            "calibrated judge (threshold over its score)".into()
        }
    }
}

fn draw_judge_curves<DB: DrawingBackend>(
    curves: &JudgeCurves,
    root: DrawingArea<DB, Shift>,
) -> std::result::Result<(), String> {
    let e = |err: DrawingAreaErrorKind<DB::ErrorType>| err.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (title_area, body) = root.split_vertically(70);
    let which = match curves.split {
        "test" => "held-out test split",
        _ => "all pairs (no split)",
    };
    draw_titles(
        &title_area,
        &format!("Same request? Precision vs recall of both judges ({which})"),
        &format!(
            "{} pairs ({} same, {} different); each judge's operating point marked",
            curves.pairs,
            curves.same,
            curves.pairs - curves.same
        ),
    )?;
    let mut chart = ChartBuilder::on(&body)
        .margin(20)
        .margin_top(10)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..1.0f64, 0f64..1.0f64)
        .map_err(e)?;
    chart
        .configure_mesh()
        .x_desc("recall: share of the same pairs called the same")
        .y_desc("precision: share of the pairs called the same that are")
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .bold_line_style(GRID.mix(0.6))
        .light_line_style(GRID.mix(0.2))
        .x_labels(11)
        .y_labels(11)
        .draw()
        .map_err(e)?;
    for (curve, color) in [(&curves.cosine, CURVE), (&curves.calibrated, CALIBRATED)] {
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(
                curve.points.iter().map(|p| (p.recall, p.precision)),
                style,
            ))
            .map_err(e)?
            .label(judge_label(curve))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
        let Some(at) = curve.operating else {
            continue;
        };
        let fill = color.filled();
        chart
            .draw_series(std::iter::once(Circle::new(
                (at.recall, at.precision),
                8,
                fill,
            )))
            .map_err(e)?
            .label(format!(
                "{} judge at {}: precision {:.2}, recall {:.2}",
                curve.judge, curve.threshold, at.precision, at.recall
            ))
            .legend(move |(x, y)| Circle::new((x + 12, y), 6, fill));
    }
    draw_legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
    root.present().map_err(e)?;
    Ok(())
}

/// A picture drawn on either backend. Generic functions cannot be passed
/// as one value, hence the two backends as an enum.
type Drawer = fn(&TuneReport, Area<'_>) -> std::result::Result<(), String>;

/// The drawing area of a PNG or an SVG.
enum Area<'a> {
    Png(DrawingArea<BitMapBackend<'a>, Shift>),
    Svg(DrawingArea<SVGBackend<'a>, Shift>),
}

/// Registers DejaVu Sans (regular and bold) once per process.
fn fonts() -> std::result::Result<(), String> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            let invalid = |_| "the embedded DejaVu Sans font is not a valid font".to_owned();
            register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).map_err(invalid)?;
            register_font(FONT, FontStyle::Bold, dejavu::sans::bold()).map_err(invalid)?;
            Ok(())
        })
        .clone()
}

fn write_png(
    path: &Path,
    draw: impl FnOnce(Area<'_>) -> std::result::Result<(), String>,
) -> Result<()> {
    let failed = |detail: String| TuneError::Plot {
        path: path.to_path_buf(),
        detail,
    };
    let (w, h) = SIZE;
    let mut pixels = vec![255u8; w as usize * h as usize * 3];
    {
        let root = BitMapBackend::with_buffer(&mut pixels, SIZE).into_drawing_area();
        draw(Area::Png(root)).map_err(failed)?;
    }
    let file = std::fs::File::create(path).map_err(|e| TuneError::io("cannot create", path, e))?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder
        .write_header()
        .map_err(|e| failed(format!("cannot write the PNG: {e}")))?;
    writer
        .write_image_data(&pixels)
        .map_err(|e| failed(format!("cannot write the PNG: {e}")))?;
    writer
        .finish()
        .map_err(|e| failed(format!("cannot write the PNG: {e}")))?;
    Ok(())
}

fn write_svg(
    path: &Path,
    draw: impl FnOnce(Area<'_>) -> std::result::Result<(), String>,
) -> Result<()> {
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, SIZE).into_drawing_area();
        draw(Area::Svg(root)).map_err(|detail| TuneError::Plot {
            path: path.to_path_buf(),
            detail,
        })?;
    }
    std::fs::write(path, text).map_err(|e| TuneError::io("cannot write", path, e))
}

fn pr_curve(report: &TuneReport, area: Area<'_>) -> std::result::Result<(), String> {
    match area {
        Area::Png(root) => draw_pr_curve(report, root),
        Area::Svg(root) => draw_pr_curve(report, root),
    }
}

fn histogram(report: &TuneReport, area: Area<'_>) -> std::result::Result<(), String> {
    match area {
        Area::Png(root) => draw_histogram(report, root),
        Area::Svg(root) => draw_histogram(report, root),
    }
}

/// "0.83" with as many decimals as the sweep's thresholds need.
fn fmt_threshold(report: &TuneReport, t: f64) -> String {
    let decimals = report.thresholds.decimals();
    format!("{t:.decimals$}")
}

fn fmt_ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.2}"))
}

/// What the data is, in one line: input, embedder, size of the train split.
fn subtitle(report: &TuneReport) -> String {
    let data = match report.mode {
        Mode::Pairs => format!(
            "{} train pairs ({} same, {} different)",
            report.train.items,
            report.train.same,
            report.train.different.unwrap_or(0)
        ),
        Mode::Traces => format!(
            "{} trace(s), {} expected detection(s)",
            report.train.items, report.train.same
        ),
    };
    let kind = report
        .kind
        .as_deref()
        .map(|k| format!(", kind {k}"))
        .unwrap_or_default();
    format!(
        "{} ({}) on {}{kind}: {data}",
        report.embedder.name,
        report.embedder.model_id,
        report.input.display()
    )
}

/// A chart with both axes from 0 to about 1: precision against recall.
type UnitChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The histogram's chart: cosines across, counts up.
type CountChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordu32>>;

/// A drawing error as text.
fn drawing_error<E: std::error::Error + Send + Sync>(err: DrawingAreaErrorKind<E>) -> String {
    err.to_string()
}

/// A picture's title in bold and, below it, its subtitle.
fn draw_titles<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    subtitle: &str,
) -> std::result::Result<(), String> {
    area.draw_text(
        title,
        &(FONT, 26).into_font().style(FontStyle::Bold).color(&BLACK),
        (20, 12),
    )
    .map_err(drawing_error)?;
    area.draw_text(
        subtitle,
        &(FONT, 15).into_font().color(&RGBColor(80, 80, 80)),
        (20, 46),
    )
    .map_err(drawing_error)
}

/// The legend of every labelled series, in a box at `position`.
fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> std::result::Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .margin(12)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK.mix(0.5))
        .label_font((FONT, 14))
        .draw()
        .map_err(drawing_error)
}

fn draw_pr_curve<DB: DrawingBackend>(
    report: &TuneReport,
    root: DrawingArea<DB, Shift>,
) -> std::result::Result<(), String> {
    root.fill(&WHITE).map_err(drawing_error)?;
    let (title_area, body) = root.split_vertically(70);
    let from = fmt_threshold(report, report.thresholds.from());
    let to = fmt_threshold(report, report.thresholds.to());
    draw_titles(
        &title_area,
        &format!("Precision vs recall, thresholds {from} to {to} (train split)"),
        &subtitle(report),
    )?;
    let mut chart = pr_chart(&body, report)?;
    draw_iso_f1(&mut chart)?;
    let points = sweep_points(report);
    draw_sweep(&mut chart, &points)?;
    label_thresholds(&mut chart, report, &points)?;
    mark_choices(&mut chart, report)?;
    draw_legend(&mut chart, SeriesLabelPosition::LowerLeft)?;
    root.present().map_err(drawing_error)?;
    Ok(())
}

/// The precision-recall chart's axes, described for pairs or traces, and
/// its grid.
fn pr_chart<'a, DB: DrawingBackend>(
    body: &'a DrawingArea<DB, Shift>,
    report: &TuneReport,
) -> std::result::Result<UnitChart<'a, DB>, String> {
    let mut chart = ChartBuilder::on(body)
        .margin(20)
        .margin_top(10)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..1.0f64, 0f64..1.05f64)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc(match report.mode {
            Mode::Pairs => "recall: share of the same pairs flagged",
            Mode::Traces => "recall: share of the expected detections that fired",
        })
        .y_desc(match report.mode {
            Mode::Pairs => "precision: share of flagged pairs that are the same",
            Mode::Traces => "precision: share of fired detections that were expected",
        })
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .bold_line_style(GRID.mix(0.6))
        .light_line_style(GRID.mix(0.2))
        .x_labels(11)
        .y_labels(11)
        .draw()
        .map_err(drawing_error)?;
    Ok(chart)
}

/// Iso-F1 curves: every point on one has the same F1.
fn draw_iso_f1<'a, DB: DrawingBackend + 'a>(
    chart: &mut UnitChart<'a, DB>,
) -> std::result::Result<(), String> {
    for f in [0.5, 0.6, 0.7, 0.8, 0.9] {
        let points: Vec<(f64, f64)> = (0..=200)
            .map(|i| f / 2.0 + (1.0 - f / 2.0) * f64::from(i) / 200.0)
            .filter(|&r| 2.0 * r - f > 1e-9)
            .map(|r| (r, f * r / (2.0 * r - f)))
            .filter(|&(_, p)| p <= 1.05)
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), GRID.stroke_width(1)))
            .map_err(drawing_error)?;
        if let Some(&(r, p)) = points.iter().find(|&&(_, p)| p <= 1.0) {
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("F1 {f:.1}"),
                    (r, p),
                    (FONT, 12).into_font().color(&RGBColor(150, 150, 150)),
                )))
                .map_err(drawing_error)?;
        }
    }
    Ok(())
}

/// The sweep's points where both figures are defined: (recall, precision,
/// threshold).
fn sweep_points(report: &TuneReport) -> Vec<(f64, f64, f64)> {
    report
        .rows
        .iter()
        .filter_map(|row| Some((row.metrics.recall?, row.metrics.precision?, row.threshold)))
        .collect()
}

/// The sweep as a line through a dot per threshold.
fn draw_sweep<'a, DB: DrawingBackend + 'a>(
    chart: &mut UnitChart<'a, DB>,
    points: &[(f64, f64, f64)],
) -> std::result::Result<(), String> {
    chart
        .draw_series(LineSeries::new(
            points.iter().map(|&(r, p, _)| (r, p)),
            CURVE.stroke_width(2),
        ))
        .map_err(drawing_error)?
        .label("the sweep, one point per threshold")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], CURVE.stroke_width(2)));
    chart
        .draw_series(
            points
                .iter()
                .map(|&(r, p, _)| Circle::new((r, p), 3, CURVE.filled())),
        )
        .map_err(drawing_error)?;
    Ok(())
}

/// A few thresholds written next to their points: multiples of 0.05,
/// skipping any too close to one already written.
fn label_thresholds<'a, DB: DrawingBackend + 'a>(
    chart: &mut UnitChart<'a, DB>,
    report: &TuneReport,
    points: &[(f64, f64, f64)],
) -> std::result::Result<(), String> {
    let mut placed: Vec<(f64, f64)> = Vec::new();
    for &(r, p, t) in points {
        let on_grid = ((t * 20.0) - (t * 20.0).round()).abs() < 1e-6;
        let crowded = placed
            .iter()
            .any(|&(pr, pp)| (pr - r).abs() < 0.06 && (pp - p).abs() < 0.035);
        if !on_grid || crowded {
            continue;
        }
        placed.push((r, p));
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((r, p))
                    + Text::new(
                        fmt_threshold(report, t),
                        (-14, 12),
                        (FONT, 13).into_font().color(&CURVE),
                    ),
            ))
            .map_err(drawing_error)?;
    }
    Ok(())
}

/// The chosen thresholds on the curve: the best F1 (a circle), the lowest
/// that meets the precision floor (a triangle), the configured ones
/// (crosses).
fn mark_choices<'a, DB: DrawingBackend + 'a>(
    chart: &mut UnitChart<'a, DB>,
    report: &TuneReport,
) -> std::result::Result<(), String> {
    if let Some(best) = &report.best_f1 {
        mark_choice(chart, report, best, BEST, "best F1".into(), Shape::Circle)?;
    }
    if let Some(floor) = &report.min_precision
        && let Some(choice) = &floor.choice
    {
        mark_choice(
            chart,
            report,
            choice,
            FLOOR,
            format!("precision ≥ {}", floor.floor),
            Shape::Triangle,
        )?;
    }
    for configured in &report.configured {
        let key = configured.key.as_deref().unwrap_or("configured");
        mark_choice(
            chart,
            report,
            configured,
            CONFIGURED,
            format!("configured ({key})"),
            Shape::Cross,
        )?;
    }
    Ok(())
}

/// One chosen threshold at its train precision and recall, with its legend
/// entry (`what` and its figures); nothing when either is undefined.
fn mark_choice<'a, DB: DrawingBackend + 'a>(
    chart: &mut UnitChart<'a, DB>,
    report: &TuneReport,
    choice: &Choice,
    color: RGBColor,
    what: String,
    shape: Shape,
) -> std::result::Result<(), String> {
    let (Some(r), Some(p)) = (choice.train.metrics.recall, choice.train.metrics.precision) else {
        return Ok(());
    };
    let label = format!(
        "{what}: threshold {}, precision {}, recall {}",
        fmt_threshold(report, choice.threshold),
        fmt_ratio(Some(p)),
        fmt_ratio(Some(r))
    );
    let style = color.filled();
    let at = std::iter::once((r, p));
    match shape {
        Shape::Circle => {
            chart
                .draw_series(at.map(|c| Circle::new(c, 8, style)))
                .map_err(drawing_error)?
                .label(label)
                .legend(move |(x, y)| Circle::new((x + 12, y), 6, style));
        }
        Shape::Triangle => {
            chart
                .draw_series(at.map(|c| TriangleMarker::new(c, 10, style)))
                .map_err(drawing_error)?
                .label(label)
                .legend(move |(x, y)| TriangleMarker::new((x + 12, y), 8, style));
        }
        Shape::Cross => {
            let stroke = color.stroke_width(3);
            chart
                .draw_series(at.map(|c| Cross::new(c, 9, stroke)))
                .map_err(drawing_error)?
                .label(label)
                .legend(move |(x, y)| Cross::new((x + 12, y), 6, stroke));
        }
    }
    Ok(())
}

/// How a chosen threshold is marked on the curve.
#[derive(Clone, Copy)]
enum Shape {
    Circle,
    Triangle,
    Cross,
}

/// The two groups the histogram compares, with their names.
struct Groups {
    positive: Vec<f32>,
    negative: Vec<f32>,
    positive_name: String,
    negative_name: String,
    title: String,
    y_desc: &'static str,
    note: Option<String>,
}

fn groups(report: &TuneReport) -> Groups {
    match report.mode {
        Mode::Pairs => {
            let train = || report.pairs.iter().filter(|p| p.split == Split::Train);
            let positive: Vec<f32> = train().filter(|p| p.same).map(|p| p.cosine).collect();
            let negative: Vec<f32> = train().filter(|p| !p.same).map(|p| p.cosine).collect();
            Groups {
                positive_name: format!("same ({} pairs)", positive.len()),
                negative_name: format!("different ({} pairs)", negative.len()),
                positive,
                negative,
                title: "Cosine of same vs different pairs (train split)".into(),
                y_desc: "pairs",
                note: None,
            }
        }
        Mode::Traces => {
            let with_similarity = || report.detections.iter().filter(|d| d.similarity.is_some());
            let positive: Vec<f32> = with_similarity()
                .filter(|d| d.expected)
                .filter_map(|d| d.similarity)
                .collect();
            let negative: Vec<f32> = with_similarity()
                .filter(|d| !d.expected)
                .filter_map(|d| d.similarity)
                .collect();
            let without = report.detections.len() - positive.len() - negative.len();
            Groups {
                positive_name: format!("expected ({})", positive.len()),
                negative_name: format!("not expected ({})", negative.len()),
                positive,
                negative,
                title: format!(
                    "Similarity of the detections at threshold {}: expected vs not",
                    fmt_threshold(report, report.thresholds.from())
                ),
                y_desc: "detections",
                note: (without > 0).then(|| {
                    format!("{without} detection(s) without a similarity (topic_cycle) not shown")
                }),
            }
        }
    }
}

fn draw_histogram<DB: DrawingBackend>(
    report: &TuneReport,
    root: DrawingArea<DB, Shift>,
) -> std::result::Result<(), String> {
    let groups = groups(report);
    root.fill(&WHITE).map_err(drawing_error)?;
    let (title_area, body) = root.split_vertically(70);
    let mut subtitle = subtitle(report);
    if let Some(note) = &groups.note {
        subtitle = format!("{subtitle}; {note}");
    }
    draw_titles(&title_area, &groups.title, &subtitle)?;
    let bins = Bins::of(report, &groups);
    let mut chart = histogram_chart(&body, report, &groups, &bins)?;
    draw_bars(&mut chart, &groups, &bins)?;
    draw_threshold_lines(&mut chart, report, bins.y_max)?;
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(drawing_error)?;
    Ok(())
}

/// The width of a histogram bar, in cosine.
const BIN: f64 = 0.02;

/// How many of each group fall in each bar, from `low` up to 1.
struct Bins {
    /// The cosine the first bar starts at: the lowest cosine or the sweep's
    /// start, whichever is lower, rounded down to a tenth (at least -1).
    low: f64,
    /// The positive group's count in each bar.
    positive: Vec<u32>,
    /// The negative group's count in each bar.
    negative: Vec<u32>,
    /// The top of the count axis, with room above the highest bar for the
    /// legend.
    y_max: u32,
}

impl Bins {
    fn of(report: &TuneReport, groups: &Groups) -> Bins {
        let all = groups.positive.iter().chain(&groups.negative);
        let low = all
            .clone()
            .fold(f64::INFINITY, |m, &c| m.min(f64::from(c)))
            .min(report.thresholds.from());
        let low = if low.is_finite() {
            ((low / 0.1).floor() * 0.1).max(-1.0)
        } else {
            0.0
        };
        let bins = ((1.0 - low) / BIN).ceil().max(1.0) as usize;
        let count = |values: &[f32]| {
            let mut counts = vec![0u32; bins];
            for &v in values {
                let i = ((f64::from(v) - low) / BIN).floor().max(0.0) as usize;
                counts[i.min(bins - 1)] += 1;
            }
            counts
        };
        let (positive, negative) = (count(&groups.positive), count(&groups.negative));
        let top = positive
            .iter()
            .chain(&negative)
            .copied()
            .max()
            .unwrap_or(0)
            .max(1);
        Bins {
            low,
            positive,
            negative,
            y_max: top + top / 4 + 1,
        }
    }
}

/// The histogram's axes (cosine across, counts up) and its grid.
fn histogram_chart<'a, DB: DrawingBackend>(
    body: &'a DrawingArea<DB, Shift>,
    report: &TuneReport,
    groups: &Groups,
    bins: &Bins,
) -> std::result::Result<CountChart<'a, DB>, String> {
    let mut chart = ChartBuilder::on(body)
        .margin(20)
        .margin_top(10)
        .x_label_area_size(55)
        .y_label_area_size(70)
        .build_cartesian_2d(bins.low..1.0f64, 0u32..bins.y_max)
        .map_err(drawing_error)?;
    chart
        .configure_mesh()
        .x_desc(format!(
            "cosine similarity ({}); \"the same\" when above the threshold",
            report.embedder.name
        ))
        .y_desc(groups.y_desc)
        .axis_desc_style((FONT, 17))
        .label_style((FONT, 14))
        .bold_line_style(GRID.mix(0.6))
        .light_line_style(GRID.mix(0.2))
        .y_labels((bins.y_max as usize + 1).min(11))
        .draw()
        .map_err(drawing_error)?;
    Ok(chart)
}

/// Semi-transparent bars, the second group over the first: where both
/// have pairs the colors mix, and each bar keeps its own outline. The
/// legend names both groups and their mix.
fn draw_bars<'a, DB: DrawingBackend + 'a>(
    chart: &mut CountChart<'a, DB>,
    groups: &Groups,
    bins: &Bins,
) -> std::result::Result<(), String> {
    let low = bins.low;
    for (counts, color, name) in [
        (&bins.negative, DIFFERENT, &groups.negative_name),
        (&bins.positive, SAME, &groups.positive_name),
    ] {
        let fill = color.mix(0.5).filled();
        let bars = || {
            counts
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(i, &c)| (low + i as f64 * BIN, c))
        };
        chart
            .draw_series(bars().map(|(x0, c)| Rectangle::new([(x0, 0), (x0 + BIN, c)], fill)))
            .map_err(drawing_error)?
            .label(name.clone())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 20, y + 6)], fill));
        chart
            .draw_series(
                bars()
                    .map(|(x0, c)| Rectangle::new([(x0, 0), (x0 + BIN, c)], color.stroke_width(1))),
            )
            .map_err(drawing_error)?;
    }
    let (under, over) = (DIFFERENT.mix(0.5).filled(), SAME.mix(0.5).filled());
    chart
        .draw_series(std::iter::empty::<Rectangle<(f64, u32)>>())
        .map_err(drawing_error)?
        .label("both (the colors mixed)")
        .legend(move |(x, y)| {
            EmptyElement::at((x, y))
                + Rectangle::new([(0, -6), (20, 6)], under)
                + Rectangle::new([(0, -6), (20, 6)], over)
        });
    Ok(())
}

/// The chosen thresholds as vertical lines: the best F1, the lowest that
/// meets the precision floor, and the configured ones (dashed).
fn draw_threshold_lines<'a, DB: DrawingBackend + 'a>(
    chart: &mut CountChart<'a, DB>,
    report: &TuneReport,
    y_max: u32,
) -> std::result::Result<(), String> {
    if let Some(best) = &report.best_f1 {
        let label = format!(
            "best F1 threshold {}",
            fmt_threshold(report, best.threshold)
        );
        threshold_line(chart, best.threshold, y_max, BEST, label, false)?;
    }
    if let Some(floor) = &report.min_precision
        && let Some(choice) = &floor.choice
    {
        let label = format!(
            "precision ≥ {} threshold {}",
            floor.floor,
            fmt_threshold(report, choice.threshold)
        );
        threshold_line(chart, choice.threshold, y_max, FLOOR, label, false)?;
    }
    for configured in &report.configured {
        let label = format!(
            "configured {} ({})",
            fmt_threshold(report, configured.threshold),
            configured.key.as_deref().unwrap_or("config")
        );
        threshold_line(chart, configured.threshold, y_max, CONFIGURED, label, true)?;
    }
    Ok(())
}

/// A vertical line at threshold `t` from 0 up to `y_max`, with its legend
/// entry.
fn threshold_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut CountChart<'a, DB>,
    t: f64,
    y_max: u32,
    color: RGBColor,
    label: String,
    dashed: bool,
) -> std::result::Result<(), String> {
    let points = vec![(t, 0), (t, y_max)];
    let style = color.stroke_width(2);
    let drawn = if dashed {
        chart.draw_series(DashedLineSeries::new(points, 8, 6, style))
    } else {
        chart.draw_series(LineSeries::new(points, style))
    };
    drawn
        .map_err(drawing_error)?
        .label(label)
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
    Ok(())
}
