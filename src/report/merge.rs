//! `bertqa merge --json`, also the merged directory's `metrics.json`
//! (`schema/merge.schema.json`), and the text `merge` prints.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::{CountedIds, Render};
use crate::evaluate::Metrics;
use crate::journal::Fingerprint;

/// A merge's document: `merge`'s JSON report, also the merged directory's
/// `metrics.json` (`schema/merge.schema.json`).
#[derive(Debug, Serialize)]
pub struct MergeJson {
    /// Always 1.
    pub schema: u32,
    /// The data file the shards answered (the one given when it has moved).
    pub data: String,
    /// Whether SQuAD 2.0's rules applied.
    pub version_2_with_negative: bool,
    /// As the first shard's metrics.json has it.
    pub postprocess: String,
    /// The official metrics over all questions, scored again from the merged answers
    /// (never averaged over shards); percentages 0–100.
    #[serde(with = "super::json::metrics")]
    pub metrics: Metrics,
    /// Questions of the data, all shards together.
    pub questions: usize,
    /// Features the shards decoded, summed.
    pub features: u64,
    /// Questions without a prediction (each scores 0).
    pub missing_predictions: CountedIds,
    /// Each shard merged, in shard order.
    pub shards: Vec<ShardJson>,
    /// The shards' common fingerprint, with `shard` `merged` and every question.
    #[serde(with = "super::json::fingerprint")]
    pub run: Fingerprint,
    /// The directory the merged files were written to.
    pub output_dir: String,
    /// The names of the files written in `output_dir`, `metrics.json` last.
    pub files: Vec<String>,
    /// How the slices' intervals were drawn: the shards' (docs/algorithm.md, "Slices").
    pub statistics: super::eval::SliceStatistics,
    /// Every slice of the questions, computed again over all of them (the margins'
    /// quartiles are the whole data's): a single run's.
    pub slices: Vec<crate::slices::Slice>,
    /// The weak slices.
    pub weak_slices: Vec<String>,
    /// The dimensions the merged run cannot give, each with why.
    pub slices_not_computed: BTreeMap<String, String>,
    /// The data reader's warnings, for the person merging; not part of the document.
    #[serde(skip)]
    pub warnings: Vec<String>,
}

/// One shard of the merge.
#[derive(Debug, Serialize)]
pub struct ShardJson {
    /// `i/N`.
    pub shard: String,
    /// The shard's directory.
    pub dir: String,
    /// The questions of the data that fall to the shard.
    pub questions: usize,
    /// As the shard's metrics.json has it.
    pub wall_s: f64,
}

impl Render for MergeJson {
    type Json<'a> = &'a MergeJson;

    fn json(&self) -> &MergeJson {
        self
    }

    fn text(&self, _verbose: bool) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "merged       {} shards, {} questions, {} features",
            self.shards.len(),
            self.questions,
            self.features
        );
        s.push_str(&super::text::metric_lines(&self.metrics, ""));
        let _ = writeln!(s, "output       {}", self.output_dir);
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Format;

    fn doc() -> MergeJson {
        let ids = ["q1".to_string(), "q2".to_string()];
        MergeJson {
            schema: 1,
            data: "dev.json".into(),
            version_2_with_negative: true,
            postprocess: "nvidia".into(),
            metrics: Metrics::V2 {
                exact: 50.0,
                f1: 62.5,
                total: 2,
                has_ans: None,
                no_ans: None,
                best: None,
            },
            questions: 2,
            features: 3,
            missing_predictions: CountedIds::first(&ids, 2, 5),
            shards: vec![
                ShardJson {
                    shard: "1/2".into(),
                    dir: "out1".into(),
                    questions: 1,
                    wall_s: 0.25,
                },
                ShardJson {
                    shard: "2/2".into(),
                    dir: "out2".into(),
                    questions: 1,
                    wall_s: 0.5,
                },
            ],
            run: Fingerprint::default()
                .with("model", "null")
                .with("shard", "merged"),
            output_dir: "merged".into(),
            files: vec!["predictions.json".into(), "metrics.json".into()],
            statistics: Default::default(),
            slices: Vec::new(),
            weak_slices: Vec::new(),
            slices_not_computed: BTreeMap::from([(
                "margin".to_string(),
                "no question's n-best list holds two answers".to_string(),
            )]),
            warnings: Vec::new(),
        }
    }

    #[test]
    fn follows_the_schema() {
        let v = serde_json::to_value(doc()).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys[..3], ["schema", "data", "version_2_with_negative"]);
        super::super::assert_follows(include_str!("../../schema/merge.schema.json"), &v);
    }

    #[test]
    fn text_names_the_shards_the_metrics_and_the_output() {
        assert_eq!(
            doc().render(Format::Text { verbose: false }),
            "merged       2 shards, 2 questions, 3 features\n\
             exact                  50.000\n\
             f1                     62.500\n\
             total                       2\n\
             output       merged\n"
        );
    }
}
