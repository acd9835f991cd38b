//! A span's metrics in words, for `perf`'s and `eval`'s text reports. What the server
//! does not export is said to be "not reported by the server".

use super::counters::us;
use super::{GpuMetrics, ServerCounters};

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

/// Bytes in words (`1.58 GB`).
pub(crate) fn bytes(b: f64) -> String {
    format!("{:.2} GB", b / 1e9)
}

/// CPU and GPU gauges in words; what the server does not export is said to be so.
pub fn gauges(cpu: Option<f64>, memory: Option<f64>, gpus: &[GpuMetrics]) -> String {
    let cpu = match (cpu, memory) {
        (Some(u), Some(m)) => format!("CPU {:.1}% ({} memory used)", u * 100.0, bytes(m)),
        (Some(u), None) => format!("CPU {:.1}%", u * 100.0),
        (None, Some(m)) => format!("CPU: utilization not reported ({} memory used)", bytes(m)),
        (None, None) => "CPU: not reported by the server".to_string(),
    };
    format!("{cpu}; {}", gpu_words(gpus))
}

/// Each GPU's utilization, memory and power in words, or that there is none.
pub(crate) fn gpu_words(gpus: &[GpuMetrics]) -> String {
    if gpus.is_empty() {
        return "GPU: not reported by the server".to_string();
    }
    let not = || "not reported".to_string();
    let gpus: Vec<String> = gpus
        .iter()
        .map(|g| {
            format!(
                "{} {}, {} used, {}",
                g.uuid,
                g.utilization
                    .map_or_else(not, |u| format!("{:.1}%", u * 100.0)),
                g.memory_used_bytes.map_or_else(not, bytes),
                g.power_w.map_or_else(not, |w| format!("{w:.1} W"))
            )
        })
        .collect();
    format!("GPU {}", gpus.join("; "))
}

/// The `nv_inference_*` counters in words.
pub fn counters(c: Option<&ServerCounters>) -> String {
    match c {
        None => "nv_inference_*: not reported by the server".to_string(),
        Some(c) => {
            let per = |us: f64| {
                if c.requests > 0 {
                    ms(us / c.requests as f64)
                } else {
                    ms(0.0)
                }
            };
            let failed = c.failures.map_or_else(
                || "failures not reported".to_string(),
                |f| format!("{f} failed"),
            );
            format!(
                "{} requests ({failed}), {} inferences, {} executions; per request queue {} + compute {} ms",
                c.requests,
                c.inferences,
                c.executions,
                per(us(c.queue_ns)),
                per(us(c.compute_input_ns) + us(c.compute_infer_ns) + us(c.compute_output_ns))
            )
        }
    }
}
