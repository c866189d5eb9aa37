//! The JSON form of a dump (schema: `docs/task-dump.schema.json`).

use super::TaskDump;

impl TaskDump {
    /// The JSON form (schema: `docs/task-dump.schema.json`).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Parses the JSON form, with a clear error for malformed input.
    pub fn from_json(json: &str) -> Result<TaskDump, serde_json::Error> {
        serde_json::from_str(json)
    }
}
