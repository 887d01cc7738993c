//! Settings kept as JSON in the database (a run's settings, an export's spec, a preset) outlive
//! the release that wrote them. Each is stored with a `version`; reading fills fields added since
//! with their defaults (serde defaults on the types) and refuses, with what to do, a version
//! newer than this build knows — a worker of an older release never guesses at a newer shape.

use serde::{de::DeserializeOwned, Serialize};

/// A type stored as versioned JSON.
pub trait Stored: Serialize + DeserializeOwned {
    /// What it is called in messages ("run settings").
    const WHAT: &'static str;
    /// The shape this build writes. Raise it when a field's meaning changes (a new field with a
    /// default that keeps the old behaviour needs no new version).
    const VERSION: u32;
}

/// The version of JSON stored before versions were written.
pub const UNVERSIONED: u32 = 1;

/// The JSON to store: the value's fields and its `version`.
pub fn to_stored<T: Stored>(value: &T) -> serde_json::Value {
    let mut json = serde_json::to_value(value).expect("stored settings serialize");
    if let serde_json::Value::Object(fields) = &mut json {
        fields.insert("version".into(), T::VERSION.into());
    }
    json
}

/// The version a stored value was written with.
pub fn version_of(json: &serde_json::Value) -> u32 {
    json.get("version").and_then(|v| v.as_u64()).map_or(UNVERSIONED, |v| v.min(u32::MAX as u64) as u32)
}

/// Reads a stored value of any version up to this build's, or says why it cannot.
pub fn from_stored<T: Stored>(json: serde_json::Value) -> Result<T, String> {
    let version = version_of(&json);
    if version > T::VERSION {
        return Err(format!(
            "these {} were written by a newer Draft Studio (version {version}; this one reads up to {}): \
             upgrade this process",
            T::WHAT,
            T::VERSION
        ));
    }
    serde_json::from_value(json).map_err(|e| format!("the stored {} cannot be read: {e}", T::WHAT))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::{ExportSpec, ReviewFilter};
    use crate::generation::{Concurrency, RunSettings, Thinking, TurnMode};

    /// Run settings as the first release wrote them (`git show e42466b:domain/src/generation.rs`).
    fn first_release_run() -> serde_json::Value {
        serde_json::json!({
            "model": "m", "endpoint_ids": [1], "max_tokens": 256, "temperature": 0.6, "top_p": null,
            "seed": 7, "system_prompt": null, "thinking": {"mode": "mix", "on_ratio": 0.5},
            "turns": "every_assistant", "concurrency": {"mode": "fixed", "limit": 8},
            "idle_timeout_secs": 60, "deadline_secs": null, "max_attempts": 3, "stream_interval": 4
        })
    }

    #[test]
    fn run_settings_of_the_first_release_read_with_defaults_for_newer_fields() {
        let json = first_release_run();
        assert_eq!(version_of(&json), UNVERSIONED);
        let s: RunSettings = from_stored(json).unwrap();
        assert_eq!(s.weight, RunSettings::DEFAULT_WEIGHT);
        assert_eq!((s.temperature, s.seed, s.max_attempts, s.stream_interval), (Some(0.6), Some(7), 3, 4));
        assert_eq!((s.turns, s.concurrency), (TurnMode::EveryAssistant, Concurrency::Fixed { limit: 8 }));
    }

    #[test]
    fn only_the_fields_a_run_cannot_do_without_are_required() {
        let s: RunSettings =
            from_stored(serde_json::json!({"model": "m", "endpoint_ids": [1], "max_tokens": 64})).unwrap();
        assert_eq!(s, RunSettings::with_defaults("m", vec![1], 64));
        assert_eq!(s.thinking, Thinking::ServerDefault);
        let missing = from_stored::<RunSettings>(serde_json::json!({"model": "m"})).unwrap_err();
        assert!(missing.starts_with("the stored run settings cannot be read"), "{missing}");
    }

    #[test]
    fn stored_settings_carry_their_version_and_a_newer_one_is_refused() {
        let json = to_stored(&RunSettings::with_defaults("m", vec![1], 64));
        assert_eq!(json["version"], RunSettings::VERSION);
        assert_eq!(
            from_stored::<RunSettings>(json.clone()).unwrap(),
            RunSettings::with_defaults("m", vec![1], 64)
        );
        let mut newer = json;
        newer["version"] = (RunSettings::VERSION + 1).into();
        let refused = from_stored::<RunSettings>(newer).unwrap_err();
        assert!(
            refused.contains("newer Draft Studio") && refused.contains("upgrade this process"),
            "{refused}"
        );
    }

    #[test]
    fn an_export_spec_of_the_first_release_keeps_its_meaning() {
        // `git show f14cb76:domain/src/export.rs`: no `excluded_flags`, no `version`.
        let old = serde_json::json!({
            "selection": {"run_ids": [3], "outcomes": ["ok"], "review": "not_rejected", "categories": [],
                          "min_completion_tokens": null, "max_completion_tokens": null,
                          "duplicates": "keep", "thinking": {"mode": "any"}, "seed": 1},
            "format": {"layout": "messages", "file": "jsonl", "reasoning": "omit", "tokenization": null,
                       "validation_share": 0.05},
            "destination": {"kind": "directory", "path": "sets"}
        });
        let spec: ExportSpec = from_stored(old).unwrap();
        assert_eq!(spec.selection.review, ReviewFilter::NotRejected);
        assert!(spec.selection.excluded_flags.is_empty(), "no flags it did not ask for");
        assert_eq!(spec.format.validation_share, 0.05);
    }
}
