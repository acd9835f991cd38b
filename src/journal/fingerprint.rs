//! A journal's header: the settings that determine a run's logits and answers.

/// Everything that determines a run's logits and answers, as named strings (data file
/// digest, model, vocabulary digest, window, decoding and padding settings, …). Two
/// runs may share a journal only when their fingerprints are equal.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fingerprint(pub Vec<(String, String)>);

impl Fingerprint {
    /// Adds one named setting.
    pub fn with(mut self, key: &str, value: impl ToString) -> Self {
        self.0.push((key.to_string(), value.to_string()));
        self
    }

    /// The value of a setting.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// As a JSON object (keys in order).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Object(
            self.0
                .iter()
                .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                .collect(),
        )
    }

    /// From a JSON object of strings.
    pub fn from_json(v: &serde_json::Value) -> Option<Self> {
        let map = v.as_object()?;
        let mut out = Vec::with_capacity(map.len());
        for (k, v) in map {
            out.push((k.clone(), v.as_str()?.to_string()));
        }
        Some(Fingerprint(out))
    }

    /// The settings that differ, described as `key: "old" in the journal, "new" now`.
    pub fn differences(&self, now: &Fingerprint) -> Vec<String> {
        self.differences_from(now, "the journal")
    }

    /// The settings that differ, naming where `self` was recorded: `key: "old" in
    /// {then}, "new" now`.
    pub fn differences_from(&self, now: &Fingerprint, then: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (k, v) in &now.0 {
            match self.get(k) {
                Some(old) if old == v => {}
                Some(old) => out.push(format!("{k}: {old:?} in {then}, {v:?} now")),
                None => out.push(format!("{k}: not in {then}, {v:?} now")),
            }
        }
        for (k, v) in &self.0 {
            if now.get(k).is_none() {
                out.push(format!("{k}: {v:?} in {then}, not set now"));
            }
        }
        out
    }
}
