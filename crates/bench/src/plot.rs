//! One SVG plot per workload: median throughput against threads, one line per design.
//!
//! The x axis is log2(threads) so that 1, 2, 16 and 64 threads are evenly readable; the y
//! axis starts at zero so that the gap between the lines is honest.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::report::{fmt_ops, Report};
use crate::Design;

fn color(d: Design) -> RGBColor {
    match d {
        Design::Legacy => RGBColor(0xd6, 0x27, 0x28),
        Design::Scalable => RGBColor(0x1f, 0x77, 0xb4),
        Design::Host => RGBColor(0x2c, 0xa0, 0x2c),
    }
}

/// Writes `<dir>/<workload>.svg` for every workload with results; returns the files.
pub fn write_plots(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for w in &report.workloads {
        if report.thread_counts(&w.name).is_empty() {
            continue;
        }
        let path = dir.join(format!("{}.svg", w.name));
        plot_workload(report, &w.name, &path)
            .map_err(|e| format!("cannot draw {}: {e}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}

fn plot_workload(
    report: &Report,
    workload: &str,
    path: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let threads = report.thread_counts(workload);
    let x = |t: usize| (t as f64).log2();
    let x_lo = x(threads[0]);
    let x_hi = x(*threads.last().unwrap_or(&1)).max(x_lo + 1.0);
    let series: Vec<(Design, Vec<(f64, f64)>)> = Design::ALL
        .into_iter()
        .map(|d| {
            let pts = threads
                .iter()
                .filter_map(|&t| report.record(workload, d, t).map(|r| (x(t), r.ops_per_sec)))
                .collect();
            (d, pts)
        })
        .filter(|(_, pts): &(Design, Vec<(f64, f64)>)| !pts.is_empty())
        .collect();
    let y_max = series
        .iter()
        .flat_map(|(_, pts)| pts.iter().map(|p| p.1))
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;

    let root = SVGBackend::new(path, (720, 450)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{workload}: throughput"), ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((x_lo - 0.2)..(x_hi + 0.2), 0.0..y_max)?;
    chart
        .configure_mesh()
        .x_desc("threads")
        .y_desc("ops/s (median)")
        .x_labels(((x_hi - x_lo) as usize + 3).min(12))
        .x_label_formatter(&|v| {
            // Label the powers of two only.
            if (v - v.round()).abs() < 1e-6 && *v >= 0.0 {
                format!("{}", 2f64.powf(v.round()))
            } else {
                String::new()
            }
        })
        .y_label_formatter(&|v| fmt_ops(*v))
        .draw()?;
    for (d, pts) in series {
        let c = color(d);
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(d.name())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(PointSeries::of_element(pts, 4, c.filled(), &|p, s, st| {
            Circle::new(p, s, st)
        }))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_svg_per_workload_with_a_line_per_design() {
        let report = crate::report::tests::sample();
        let dir = tempfile::tempdir().unwrap();
        let files = write_plots(&report, dir.path()).unwrap();
        assert_eq!(files, vec![dir.path().join("w.svg")]);
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for label in ["legacy", "scalable", "host", "threads"] {
            assert!(svg.contains(label), "no {label} in the plot");
        }
        assert!(svg.matches("<polyline").count() >= 3, "{svg}");
    }

    #[test]
    fn unwritable_directory_is_an_error() {
        let report = crate::report::tests::sample();
        let err = write_plots(&report, Path::new("/nonexistent/dir")).unwrap_err();
        assert!(err.contains("cannot draw"), "{err}");
    }
}
