//! SVG plots of simulator output (plotters' SVG backend: no fonts or system libraries).

use anyhow::{anyhow, Result};
use kintsugi_sim::utilization::UtilRow;
use plotters::prelude::*;
use std::path::Path;

/// Mean and max link utilisation over nodes, uplink and downlink, against time.
pub fn utilization_svg(rows: &[UtilRow], nodes: &[u32], title: &str, path: &Path) -> Result<()> {
    let mut bins: Vec<(f64, f64)> = rows.iter().map(|r| (r.t_start, r.t_end)).collect();
    bins.sort_by(|a, b| a.0.total_cmp(&b.0));
    bins.dedup();
    let series = |pick: fn(&UtilRow) -> f64, max: bool| -> Vec<(f64, f64)> {
        bins.iter()
            .map(|&(t0, t1)| {
                let vals: Vec<f64> = rows.iter().filter(|r| r.t_start == t0 && nodes.contains(&r.node)).map(pick).collect();
                let v = if max { vals.iter().copied().fold(0.0, f64::max) } else { vals.iter().sum::<f64>() / vals.len().max(1) as f64 };
                ((t0 + t1) / 2.0, v)
            })
            .collect()
    };
    let end = bins.last().map_or(1.0, |b| b.1);
    let root = SVGBackend::new(path, (900, 480)).into_drawing_area();
    let err = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(0.0..end, 0.0..1.05)
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc("time (s)").y_desc("link utilisation").draw().map_err(|e| err(&e))?;
    type Line = (&'static str, fn(&UtilRow) -> f64, bool, RGBColor);
    let lines: [Line; 4] = [
        ("uplink, mean over nodes", |r| r.up, false, BLUE),
        ("uplink, max", |r| r.up, true, CYAN),
        ("downlink, mean over nodes", |r| r.down, false, RED),
        ("downlink, max", |r| r.down, true, MAGENTA),
    ];
    for (label, pick, max, color) in lines {
        chart
            .draw_series(LineSeries::new(series(pick, max), color.stroke_width(2)))
            .map_err(|e| err(&e))?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
    }
    chart.configure_series_labels().background_style(WHITE.mix(0.8)).border_style(BLACK).draw().map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

/// One labelled point per scheme: the paper's Figures 9 and 10 (degraded read time against
/// recovery time, both lower-left better).
pub fn scatter_svg(points: &[(String, f64, f64)], x_desc: &str, y_desc: &str, title: &str, path: &Path) -> Result<()> {
    let err = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    let xmax = points.iter().map(|p| p.1).fold(0.0, f64::max) * 1.15 + f64::MIN_POSITIVE;
    let ymax = points.iter().map(|p| p.2).fold(0.0, f64::max) * 1.15 + f64::MIN_POSITIVE;
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..xmax, 0.0..ymax)
        .map_err(|e| err(&e))?;
    chart.configure_mesh().x_desc(x_desc).y_desc(y_desc).draw().map_err(|e| err(&e))?;
    chart
        .draw_series(points.iter().map(|(label, x, y)| {
            EmptyElement::at((*x, *y)) + Circle::new((0, 0), 4, BLUE.filled()) + Text::new(label.clone(), (6, -14), ("sans-serif", 14))
        }))
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
