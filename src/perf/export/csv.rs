//! perf_analyzer's CSV (`-f FILE`, with its verbose columns): the same header names,
//! latencies in whole microseconds, "Inferences/Second" counting features (a batch of
//! B is B inferences, as perf_analyzer counts it), rows by increasing throughput.

use super::{fmt_num, Report};
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

/// The CSV file's bytes (fields quoted where CSV needs it, none of today's).
pub(crate) fn render(report: &Report) -> Vec<u8> {
    let first = match report.load {
        Load::Concurrency(_) => "Concurrency",
        Load::RequestRate { .. } => "Request Rate",
    };
    let mut out = csv::Writer::from_writer(Vec::new());
    let mut levels: Vec<_> = report.levels.iter().collect();
    levels.sort_by(|a, b| a.features_per_s.total_cmp(&b.features_per_s));
    // Writing into memory cannot fail.
    let _ = out.write_record(std::iter::once(first).chain(COLUMNS));
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
        let _ = out.write_record([
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
        ]);
    }
    out.into_inner().expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::super::sample;
    use super::*;
    use crate::perf::{Distribution, Level};

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
    fn every_row_has_every_column() {
        let text = String::from_utf8(render(&sample::report())).unwrap();
        for line in text.lines() {
            assert_eq!(line.split(',').count(), COLUMNS.len() + 1, "{line}");
        }
    }
}
