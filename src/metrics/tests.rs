//! Unit tests of page reading and span arithmetic.

use super::*;

const GPU_PAGE: &str = include_str!("../../tests/fixtures/metrics/triton-gpu.prom");

fn null() -> ModelKey {
    ModelKey {
        name: "null".into(),
        version: String::new(),
    }
}

#[test]
fn a_gpu_servers_page_gives_every_gpu_the_cpu_and_the_models_counters() {
    let r = Reading::parse(GPU_PAGE.as_bytes(), &null()).unwrap();
    assert_eq!(r.cpu_utilization, Some(0.35));
    assert_eq!(r.cpu_memory_used_bytes, Some(61e9));
    assert_eq!(r.gpus.len(), 2);
    let g = &r.gpus["GPU-6f1c0d1e-0000-4000-8000-00000000a100"];
    assert_eq!(g.utilization, Some(0.62));
    assert_eq!(g.power_w, Some(212.5));
    assert_eq!(g.memory_used_bytes, Some(2147483648.0));
    assert_eq!(g.memory_total_bytes, Some(85899345920.0));
    let m = r.model.unwrap();
    assert_eq!((m.requests, m.failures), (1200, Some(2)));
    assert_eq!((m.inferences, m.executions), (4800, 600));
    assert_eq!(m.queue_ns, 600_000_000);
    assert_eq!(m.busy_ns, None, "Prometheus has no busy time");
    // Another model's counters are not this one's; a version not on the page is none.
    let other = ModelKey {
        name: "null".into(),
        version: "2".into(),
    };
    assert_eq!(
        Reading::parse(GPU_PAGE.as_bytes(), &other).unwrap().model,
        None
    );
}

#[test]
fn a_cpu_only_page_has_no_gpu_and_missing_metrics_stay_unknown() {
    let page = "# TYPE nv_cpu_utilization gauge\nnv_cpu_utilization 0.5\n";
    let r = Reading::parse(page.as_bytes(), &null()).unwrap();
    assert_eq!(r.cpu_utilization, Some(0.5));
    assert_eq!(r.cpu_memory_used_bytes, None);
    assert!(r.gpus.is_empty());
    assert_eq!(r.model, None);
}

#[test]
fn pages_that_are_not_prometheus_text_say_so() {
    let e = Reading::parse(b"<html><body>Bad gateway</body></html>", &null()).unwrap_err();
    assert!(
        e.contains("not Prometheus text (no sample line; it begins \"<html>"),
        "{e}"
    );
    assert!(Reading::parse(b"", &null())
        .unwrap_err()
        .contains("empty page"));
    assert!(Reading::parse(&[0xff, 0xfe, 0x00], &null())
        .unwrap_err()
        .contains("not UTF-8"));
}

fn reading(cpu: f64, requests: u64, gpu_util: Option<f64>) -> Reading {
    let mut r = Reading {
        cpu_utilization: Some(cpu),
        cpu_memory_used_bytes: Some(1000.0),
        model: Some(ServerCounters {
            requests,
            queue_ns: requests * 10_000,
            ..ServerCounters::prometheus()
        }),
        ..Default::default()
    };
    if let Some(u) = gpu_util {
        r.gpus.insert(
            "GPU-a".into(),
            GpuReading {
                utilization: Some(u),
                memory_used_bytes: Some(u * 100.0),
                ..Default::default()
            },
        );
    }
    r
}

#[test]
fn gauges_are_averaged_counters_are_differences_and_endpoints_add_up() {
    let (a, b, c) = (
        reading(0.2, 100, Some(0.5)),
        reading(0.4, 150, Some(0.7)),
        reading(0.6, 180, None),
    );
    let one = EndpointMetrics::over("e1", &[&a, &b], Some(&a), Some(&c), None);
    assert_eq!(one.samples, 2);
    assert!((one.cpu_utilization.unwrap() - 0.3).abs() < 1e-12);
    assert_eq!(one.inference.unwrap().requests, 80);
    assert_eq!(one.inference.unwrap().queue_ns, 800_000);
    assert!((one.gpus[0].utilization.unwrap() - 0.6).abs() < 1e-12);
    assert_eq!(one.gpus[0].memory_used_max_bytes, Some(70.0));
    let two = EndpointMetrics::over("e2", &[&c], Some(&a), None, Some("down".into()));
    assert_eq!(two.inference, None, "a counter needs both ends");
    let total = SpanMetrics::total(vec![one, two]);
    assert!((total.cpu_utilization.unwrap() - 0.45).abs() < 1e-12);
    assert_eq!(total.cpu_memory_used_bytes, Some(2000.0));
    assert_eq!(total.inference.unwrap().requests, 80);
    assert_eq!(total.gpus.len(), 1);
    assert_eq!(
        total.troubles(),
        vec![("e2", "metrics at e2: down: not reported".to_string())]
    );
    let none = SpanMetrics::total(vec![EndpointMetrics::over("e3", &[], None, None, None)]);
    assert_eq!(none.cpu_utilization, None);
    assert_eq!(none.inference, None);
}
