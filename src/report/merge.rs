//! `bertqa merge --json`, also the merged directory's `metrics.json`
//! (`schema/merge.schema.json`).

use serde::Serialize;
use serde_json::Value;

use super::CountedIds;

#[derive(Debug, Serialize)]
pub struct MergeJson<'a> {
    /// Always 1.
    pub schema: u32,
    pub data: String,
    pub version_2_with_negative: bool,
    /// As the first shard's metrics.json has it.
    pub postprocess: Value,
    /// The official metrics over all questions.
    pub metrics: Value,
    pub questions: usize,
    pub features: u64,
    pub missing_predictions: CountedIds<'a>,
    pub shards: Vec<ShardJson>,
    pub run: Value,
    pub output_dir: String,
    pub files: Vec<String>,
}

/// One shard of the merge.
#[derive(Debug, Serialize)]
pub struct ShardJson {
    /// `i/N`.
    pub shard: String,
    pub dir: String,
    pub questions: usize,
    /// As the shard's metrics.json has it.
    pub wall_s: Value,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn follows_the_schema() {
        let ids = ["q1".to_string(), "q2".to_string()];
        let doc = MergeJson {
            schema: 1,
            data: "dev.json".into(),
            version_2_with_negative: true,
            postprocess: json!("nvidia"),
            metrics: json!({"exact": 50.0, "total": 2}),
            questions: 2,
            features: 3,
            missing_predictions: CountedIds::first(&ids, 2, 5),
            shards: vec![ShardJson {
                shard: "1/2".into(),
                dir: "out1".into(),
                questions: 1,
                wall_s: json!(0.25),
            }],
            run: json!({"model": "null", "shard": "merged"}),
            output_dir: "merged".into(),
            files: vec!["predictions.json".into(), "metrics.json".into()],
        };
        let v = serde_json::to_value(&doc).unwrap();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys[..3], ["schema", "data", "version_2_with_negative"]);
        super::super::assert_follows(include_str!("../../schema/merge.schema.json"), &v);
    }
}
