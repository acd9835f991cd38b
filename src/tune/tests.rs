use super::config::Dynamic;
use super::*;

fn settings(max_batch_size: usize, instances: usize, delay_us: Option<u64>) -> Settings {
    Settings {
        max_batch_size,
        instances,
        dynamic: delay_us.map(|delay_us| Dynamic {
            delay_us,
            preferred: config::Preferred::Server,
        }),
    }
}

fn measured(s: Settings, status: &'static str) -> Candidate {
    Candidate {
        settings: s,
        served: None,
        status,
        error: None,
        level: None,
        remeasured: None,
    }
}

#[test]
fn only_another_max_batch_size_without_dynamic_batching_serves_as_one_measured() {
    let done = [
        measured(settings(8, 1, Some(100)), "measured"),
        measured(settings(8, 2, None), "failed"),
        measured(settings(8, 1, None), "measured"),
    ];
    // Requests of 8 rows: max batch 32 without batching serves as #2.
    assert_eq!(serves_as(&settings(32, 1, None), 8, &done), Some(2));
    // Not with dynamic batching, other instances, or a max batch below the rows.
    assert_eq!(serves_as(&settings(32, 1, Some(0)), 8, &done), None);
    assert_eq!(serves_as(&settings(32, 2, None), 8, &done), None);
    assert_eq!(serves_as(&settings(4, 1, None), 8, &done), None);
    // Nor as one that was not measured (#1 failed to serve) or one below the rows.
    assert_eq!(serves_as(&settings(16, 2, None), 8, &done), None);
    assert_eq!(serves_as(&settings(16, 1, None), 16, &done), None);
}
