//! perf_analyzer's CSV (`-f FILE`, with its verbose columns): the same header names,
//! latencies in whole microseconds, "Inferences/Second" counting features (a batch of
//! B is B inferences, as perf_analyzer counts it), rows by increasing throughput.

use super::{fmt_num, Exporter, Report};
use crate::perf::Load;

/// The columns after the first ("Concurrency" or "Request Rate").
pub(crate) const COLUMNS: [&str; 15] = [
    "Inferences/Second",
    "Client Send",
    "Network+Server Send/Recv",
    "Server Queue",
    "Server Compute Input",
    "Server Compute Infer",
    "Server Compute Output",
    "Client Recv",
    "p50 latency",
    "p90 latency",
    "p95 latency",
    "p99 latency",
    "Avg latency",
    "request/response",
    "response wait",
];

/// perf_analyzer's server-metric columns (its `--collect-metrics`: one `uuid:value;`
/// per GPU, utilization in percent, power in watts, memory in bytes) and bertqa's CPU
/// ones; written only when the sweep read metrics, empty cells where the server did
/// not report a metric.
pub(crate) const METRIC_COLUMNS: [&str; 6] = [
    "Avg GPU Utilization",
    "Avg GPU Power Usage",
    "Max GPU Memory Usage",
    "Total GPU Memory",
    "Avg CPU Utilization",
    "Avg CPU Memory Usage",
];

/// The metric cells of a level (see [`METRIC_COLUMNS`]).
fn metric_cells(l: &crate::perf::LevelResult) -> [String; 6] {
    let Some(m) = &l.metrics else {
        return Default::default();
    };
    let per_gpu = |f: fn(&crate::metrics::GpuMetrics) -> Option<f64>| -> String {
        m.gpus
            .iter()
            .filter_map(|g| f(g).map(|v| format!("{}:{};", g.uuid, fmt_num(v))))
            .collect()
    };
    [
        per_gpu(|g| g.utilization.map(|u| (u * 1000.0).round() / 10.0)),
        per_gpu(|g| g.power_w.map(|w| (w * 10.0).round() / 10.0)),
        per_gpu(|g| g.memory_used_max_bytes.map(f64::round)),
        per_gpu(|g| g.memory_total_bytes.map(f64::round)),
        m.cpu_utilization
            .map_or(String::new(), |u| format!("{:.1}", u * 100.0)),
        m.cpu_memory_used_bytes
            .map_or(String::new(), |b| fmt_num(b.round())),
    ]
}

/// perf_analyzer's CSV (`--csv`).
pub struct CsvExporter;

impl Exporter for CsvExporter {
    /// The CSV file's bytes (fields quoted where CSV needs it, none of today's).
    fn serialize(&self, report: &Report) -> Vec<u8> {
        let first = match report.load {
            Load::Concurrency(_) => "Concurrency",
            Load::RequestRate { .. } => "Request Rate",
        };
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut levels: Vec<_> = report.levels.iter().collect();
        levels.sort_by(|a, b| a.features_per_s.total_cmp(&b.features_per_s));
        let metrics = report.levels.iter().any(|l| l.metrics.is_some());
        let extra: &[&str] = if metrics { &METRIC_COLUMNS } else { &[] };
        // Writing into memory cannot fail.
        let _ = out.write_record(
            std::iter::once(first)
                .chain(COLUMNS)
                .chain(extra.iter().copied()),
        );
        for l in levels {
            let us = |x: f64| format!("{}", x.round() as i64);
            // Empty cells where the server reports no statistics.
            let server = |x: f64| {
                if l.server_reported {
                    us(x)
                } else {
                    String::new()
                }
            };
            let cells = [
                fmt_num(l.level.value()),
                format!("{:.1}", l.features_per_s),
                us(l.client.send_us),
                server(l.client.network_us),
                server(l.server.queue_us),
                server(l.server.compute_input_us),
                server(l.server.compute_infer_us),
                server(l.server.compute_output_us),
                us(l.client.recv_us),
                us(l.latency.p50_us),
                us(l.latency.p90_us),
                us(l.latency.p95_us),
                us(l.latency.p99_us),
                us(l.latency.avg_us),
                us(l.client.send_us + l.client.recv_us),
                us(l.client.response_wait_us),
            ];
            let metric_cells = if metrics {
                metric_cells(l).to_vec()
            } else {
                Vec::new()
            };
            let _ = out.write_record(cells.into_iter().chain(metric_cells));
        }
        out.into_inner().expect("writing to memory")
    }
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;
    use crate::perf::{Distribution, Level};

    fn render(r: &Report) -> Vec<u8> {
        CsvExporter.serialize(r)
    }

    #[test]
    fn perf_analyzer_header_and_rows_by_throughput() {
        let text = String::from_utf8(render(&sample::report())).unwrap();
        let expected = "\
Concurrency,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,\
Server Compute Input,Server Compute Infer,Server Compute Output,Client Recv,\
p50 latency,p90 latency,p95 latency,p99 latency,Avg latency,request/response,response wait
2,180.0,40,300,100,10,9475,9,21,9500,11400,12350,14250,9975,61,9914
1,200.0,40,300,100,10,4750,9,21,5000,6000,6500,7500,5250,61,5189
";
        assert_eq!(text, expected);
    }

    #[test]
    fn request_rate_sweeps_name_their_first_column() {
        let mut r = sample::report();
        r.load = Load::RequestRate {
            rates: vec![12.5],
            distribution: Distribution::Poisson,
            seed: 1,
        };
        r.levels = vec![sample::level(Level::RequestRate(12.5), 25.0, 4.0, 6.0)];
        let text = String::from_utf8(render(&r)).unwrap();
        let mut lines = text.lines();
        assert!(lines
            .next()
            .unwrap()
            .starts_with("Request Rate,Inferences/Second,"));
        assert!(lines.next().unwrap().starts_with("12.5,25.0,"));
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn metric_columns_come_only_with_metrics() {
        let r = sample::with_metrics();
        let text = String::from_utf8(render(&r)).unwrap();
        let mut lines = text.lines();
        assert!(lines.next().unwrap().ends_with(
            ",response wait,Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,\
             Total GPU Memory,Avg CPU Utilization,Avg CPU Memory Usage"
        ));
        for line in lines {
            assert_eq!(line.split(',').count(), COLUMNS.len() + 7, "{line}");
            assert!(
                line.ends_with(
                    ",GPU-a:62;,GPU-a:212.5;,GPU-a:2000000000;,GPU-a:80000000000;,35.0,61000000000"
                ),
                "{line}"
            );
        }
    }

    #[test]
    fn every_row_has_every_column() {
        let text = String::from_utf8(render(&sample::report())).unwrap();
        for line in text.lines() {
            assert_eq!(line.split(',').count(), COLUMNS.len() + 1, "{line}");
        }
    }
}
