//! Which candidates `tune` measures, and in which order.
//!
//! Contract:
//! - The space is four lists (the flags): max batch sizes, queue delays (each a
//!   dynamic-batching candidate), instance counts, preferred batch sizes. A candidate
//!   is scored by the caller (its throughput within the budget, 0 when it failed or
//!   kept no level within it); a higher score is better, ties keep the earlier.
//! - The default search starts from the current configuration (measured first), then
//!   varies one setting at a time, in the order queue delay, max batch size, instances,
//!   preferred sizes, each time moving to the best found; then it measures the best's
//!   neighbours (the next smaller and larger value of each setting in its list) and
//!   moves, until no neighbour is better. A point is measured once. It moves only to a
//!   point that scores more than [`MOVE_MARGIN`] above the current one: smaller
//!   differences are within a measurement's noise, and the caller measures the best few
//!   again before naming one.
//! - The exhaustive search measures the current configuration, then every point of the
//!   grid in order.
//! - The caller may stop the search at any point ([`Step::Stop`]): nothing more is
//!   measured.

use super::config::{Dynamic, Preferred, Settings};

/// The values each setting takes.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    /// Max batch sizes (empty: not varied).
    pub max_batch_sizes: Vec<usize>,
    /// Queue delays, microseconds, each a dynamic-batching candidate (empty: dynamic
    /// batching left as found).
    pub delays_us: Vec<u64>,
    /// Instance counts (empty: not varied).
    pub instances: Vec<usize>,
    /// Preferred batch sizes of the dynamic-batching candidates (empty: the server's
    /// default only).
    pub preferred: Vec<Preferred>,
}

/// What measuring one candidate gave.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Its score: features per second within the budget (0 when it failed or kept no
    /// level within it); higher is better.
    Score(f64),
    /// Measure nothing more.
    Stop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dim {
    MaxBatch,
    Delay,
    Instances,
    Preferred,
}

/// The queue delay first: from a configuration without dynamic batching, the max batch
/// size changes nothing until dynamic batching is on (each request runs alone), so its
/// values are compared once it is.
const DIMS: [Dim; 4] = [Dim::Delay, Dim::MaxBatch, Dim::Instances, Dim::Preferred];

/// How much better (a fraction of the current score) a point must score for the search
/// to move to it.
pub const MOVE_MARGIN: f64 = 0.03;

/// Most rounds of the neighbourhood search (each moves to a strictly better point, so
/// it ends anyway; this bounds a noisy climb).
const MOST_ROUNDS: usize = 8;

impl Space {
    /// Every point of the grid, in order (max batch size slowest); a setting whose list
    /// is empty keeps `start`'s value.
    pub(crate) fn grid(&self, start: &Settings) -> Vec<Settings> {
        let or_start = |list: &[usize], v: usize| match list {
            [] => vec![v],
            l => l.to_vec(),
        };
        let dynamics: Vec<Option<Dynamic>> = match self.delays_us.as_slice() {
            [] => vec![start.dynamic.clone()],
            delays => {
                let preferred = match self.preferred.as_slice() {
                    [] => vec![Preferred::Server],
                    p => p.to_vec(),
                };
                delays
                    .iter()
                    .flat_map(|&delay_us| {
                        preferred.iter().map(move |p| {
                            Some(Dynamic {
                                delay_us,
                                preferred: p.clone(),
                            })
                        })
                    })
                    .collect()
            }
        };
        let mut out = Vec::new();
        for max_batch_size in or_start(&self.max_batch_sizes, start.max_batch_size) {
            for dynamic in &dynamics {
                for instances in or_start(&self.instances, start.instances) {
                    out.push(Settings {
                        max_batch_size,
                        instances,
                        dynamic: dynamic.clone(),
                    });
                }
            }
        }
        out
    }

    /// `s` with setting `dim` at each value of its list (`adjacent`: only the values
    /// next to `s`'s in the sorted list).
    fn along(&self, s: &Settings, dim: Dim, adjacent: bool) -> Vec<Settings> {
        let preferred = |s: &Settings| match &s.dynamic {
            Some(d) => d.preferred.clone(),
            None => self.preferred.first().cloned().unwrap_or(Preferred::Server),
        };
        match dim {
            Dim::MaxBatch => pick(&self.max_batch_sizes, s.max_batch_size, adjacent)
                .into_iter()
                .map(|v| Settings {
                    max_batch_size: v,
                    ..s.clone()
                })
                .collect(),
            Dim::Instances => pick(&self.instances, s.instances, adjacent)
                .into_iter()
                .map(|v| Settings {
                    instances: v,
                    ..s.clone()
                })
                .collect(),
            Dim::Delay => {
                let current = s.dynamic.as_ref().map(|d| d.delay_us);
                let values = match (current, adjacent) {
                    (Some(c), true) => pick(&self.delays_us, c, true),
                    _ => self.delays_us.clone(),
                };
                values
                    .into_iter()
                    .map(|delay_us| Settings {
                        dynamic: Some(Dynamic {
                            delay_us,
                            preferred: preferred(s),
                        }),
                        ..s.clone()
                    })
                    .collect()
            }
            Dim::Preferred => match &s.dynamic {
                None => Vec::new(),
                Some(d) => self
                    .preferred
                    .iter()
                    .filter(|p| **p != d.preferred)
                    .map(|p| Settings {
                        dynamic: Some(Dynamic {
                            delay_us: d.delay_us,
                            preferred: p.clone(),
                        }),
                        ..s.clone()
                    })
                    .collect(),
            },
        }
    }
}

/// The values of `list` other than `current`; with `adjacent`, only the next smaller
/// and next larger one.
fn pick<T: Copy + PartialOrd>(list: &[T], current: T, adjacent: bool) -> Vec<T> {
    if !adjacent {
        return list.iter().copied().filter(|&v| v != current).collect();
    }
    let below =
        list.iter()
            .copied()
            .filter(|&v| v < current)
            .fold(None, |m: Option<T>, v| match m {
                Some(m) if m >= v => Some(m),
                _ => Some(v),
            });
    let above =
        list.iter()
            .copied()
            .filter(|&v| v > current)
            .fold(None, |m: Option<T>, v| match m {
                Some(m) if m <= v => Some(m),
                _ => Some(v),
            });
    below.into_iter().chain(above).collect()
}

/// Runs the search from `start`, calling `measure` once per point, in order. Returns
/// the points measured, in order, with their scores.
pub(crate) fn search(
    start: &Settings,
    space: &Space,
    exhaustive: bool,
    mut measure: impl FnMut(&Settings) -> Step,
) -> Vec<(Settings, f64)> {
    let mut seen: Vec<(Settings, f64)> = Vec::new();
    // Measures `s` unless seen; false when told to stop.
    let mut visit = |s: &Settings, seen: &mut Vec<(Settings, f64)>| -> bool {
        // A point the server would apply as one already measured is that point.
        if seen.iter().any(|(x, _)| x.effective() == s.effective()) {
            return true;
        }
        match measure(s) {
            Step::Score(score) => {
                seen.push((s.clone(), score));
                true
            }
            Step::Stop => false,
        }
    };
    if !visit(start, &mut seen) {
        return seen;
    }
    if exhaustive {
        for s in space.grid(start) {
            if !visit(&s, &mut seen) {
                break;
            }
        }
        return seen;
    }
    let mut best = start.clone();
    let score = |seen: &[(Settings, f64)], s: &Settings| {
        seen.iter()
            .find(|(x, _)| x == s)
            .map_or(f64::NEG_INFINITY, |(_, v)| *v)
    };
    for dim in DIMS {
        for s in space.along(&best, dim, false) {
            if !visit(&s, &mut seen) {
                return seen;
            }
        }
        best = best_of(&seen, &best, &score);
    }
    for _ in 0..MOST_ROUNDS {
        let before = best.clone();
        for dim in DIMS {
            for s in space.along(&best, dim, true) {
                if !visit(&s, &mut seen) {
                    return seen;
                }
            }
        }
        best = best_of(&seen, &best, &score);
        if best == before {
            break;
        }
    }
    seen
}

/// The point to move to: the best seen when it scores more than [`MOVE_MARGIN`] above
/// `current`, else `current`.
fn best_of(
    seen: &[(Settings, f64)],
    current: &Settings,
    score: &impl Fn(&[(Settings, f64)], &Settings) -> f64,
) -> Settings {
    let here = score(seen, current);
    let mut best = (current.clone(), here);
    for (s, v) in seen {
        if *v > best.1 {
            best = (s.clone(), *v);
        }
    }
    if best.1 > here * (1.0 + MOVE_MARGIN) || here == f64::NEG_INFINITY {
        best.0
    } else {
        current.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Space {
        Space {
            max_batch_sizes: vec![8, 16, 32, 64],
            delays_us: vec![0, 100, 500, 2000],
            instances: vec![1, 2, 4],
            preferred: vec![Preferred::Server, Preferred::Sizes(vec![4, 8])],
        }
    }

    fn poor_start() -> Settings {
        Settings {
            max_batch_size: 8,
            instances: 1,
            dynamic: None,
        }
    }

    /// A model whose every execution costs 20 ms whatever its batch, under a 100 ms
    /// budget, loaded by 1 to 64 requests in flight: requests/s at the largest load
    /// within the budget. With preferred sizes, a batch goes as soon as one is reached.
    fn fixed_cost(s: &Settings) -> f64 {
        let (t_ms, budget_ms) = (20.0, 100.0);
        let (batch, delay_ms) = match &s.dynamic {
            None => (1, 0.0),
            Some(d) => {
                let batch = s.preferred_sent().map_or(s.max_batch_size, |v| v[0]);
                (batch, d.delay_us as f64 / 1000.0)
            }
        };
        let per_round = (batch * s.instances) as f64;
        (1..=64)
            .filter_map(|c| {
                let latency = t_ms * (c as f64 / per_round).ceil() + delay_ms;
                (latency <= budget_ms).then_some(c as f64 / latency * 1000.0)
            })
            .fold(0.0, f64::max)
    }

    #[test]
    fn the_default_search_comes_near_the_grid_in_half_its_candidates() {
        let start = poor_start();
        let grid = search(&start, &space(), true, |s| Step::Score(fixed_cost(s)));
        // Instances vary fastest, then the preferred sizes, the queue delay, the max batch.
        assert_eq!(grid[2].0.instances, 2);
        assert_eq!(
            grid[4].0.dynamic.as_ref().unwrap().preferred,
            Preferred::Sizes(vec![4, 8])
        );
        let default = search(&start, &space(), false, |s| Step::Score(fixed_cost(s)));
        let best = |v: &[(Settings, f64)]| v.iter().map(|x| x.1).fold(0.0, f64::max);
        assert_eq!(grid.len(), 1 + 4 * 4 * 3 * 2);
        assert!(
            default.len() * 2 <= grid.len(),
            "{} candidates",
            default.len()
        );
        assert!(
            best(&default) >= 0.95 * best(&grid),
            "{} against {}",
            best(&default),
            best(&grid)
        );
        assert!(best(&default) >= 2.0 * fixed_cost(&start));
        // No point twice; the start first.
        assert_eq!(default[0].0, start);
        for (i, (s, _)) in default.iter().enumerate() {
            assert!(!default[..i].iter().any(|(x, _)| x == s), "{s:?} twice");
        }
    }

    /// A model without a batch dimension: only its instances can change.
    #[test]
    fn empty_lists_keep_the_start_and_vary_nothing() {
        let start = Settings {
            max_batch_size: 0,
            instances: 1,
            dynamic: None,
        };
        let only_instances = Space {
            max_batch_sizes: Vec::new(),
            delays_us: Vec::new(),
            preferred: Vec::new(),
            ..space()
        };
        for exhaustive in [false, true] {
            let seen = search(&start, &only_instances, exhaustive, |s| {
                Step::Score(s.instances as f64)
            });
            let instances: Vec<usize> = seen.iter().map(|(s, _)| s.instances).collect();
            assert_eq!(instances, vec![1, 2, 4], "exhaustive {exhaustive}");
            assert!(seen
                .iter()
                .all(|(s, _)| s.max_batch_size == 0 && s.dynamic.is_none()));
        }
    }

    /// Within the noise, the search stays: a neighbour better by less than
    /// `MOVE_MARGIN` is not a move.
    #[test]
    fn the_search_moves_only_beyond_the_noise() {
        let start = poor_start();
        let seen = search(&start, &space(), false, |s| {
            Step::Score(if s.max_batch_size == 16 { 1.02 } else { 1.0 })
        });
        let measured_16_4 = seen
            .iter()
            .any(|(s, _)| s.max_batch_size == 16 && s.instances == 4);
        assert!(!measured_16_4, "it moved to max batch 16 on 2%: {seen:?}");
    }

    #[test]
    fn a_stop_ends_the_search_at_once() {
        let mut calls = 0;
        let seen = search(&poor_start(), &space(), false, |_| {
            calls += 1;
            if calls == 3 {
                Step::Stop
            } else {
                Step::Score(1.0)
            }
        });
        assert_eq!((calls, seen.len()), (3, 2));
    }

    /// Half of max batch 8 is the list 4,8; a list trimmed to nothing is the server's.
    #[test]
    fn points_the_server_applies_alike_are_measured_once() {
        let start = Settings {
            max_batch_size: 8,
            instances: 1,
            dynamic: Some(Dynamic {
                delay_us: 0,
                preferred: Preferred::Sizes(vec![4, 8]),
            }),
        };
        let space = Space {
            max_batch_sizes: vec![8],
            delays_us: vec![0],
            instances: vec![1],
            preferred: vec![
                Preferred::Half,
                Preferred::Sizes(vec![64]),
                Preferred::Server,
            ],
        };
        let seen = search(&start, &space, true, |_| Step::Score(1.0));
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(
            seen[1].0.effective().dynamic.unwrap().preferred,
            Preferred::Server
        );
    }

    #[test]
    fn neighbours_are_the_next_values_of_the_list() {
        assert_eq!(pick(&[8, 16, 32, 64], 16, true), vec![8, 32]);
        assert_eq!(pick(&[8, 16, 32, 64], 12, true), vec![8, 16]);
        assert_eq!(pick(&[8, 16, 32, 64], 64, true), vec![32]);
        assert_eq!(pick(&[8, 16, 32, 64], 16, false), vec![8, 32, 64]);
    }
}
