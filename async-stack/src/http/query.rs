//! The query parameters of a request, parsed and checked: each reason a
//! value is refused is one line, sent back with `400 Bad Request`.
//!
//! Parameters the route does not know are ignored, as Go's handlers do;
//! a parameter given twice counts once, the first time.

/// The parameters of one request's query string.
pub(super) struct Query<'a> {
    pairs: Vec<(&'a str, &'a str)>,
}

impl<'a> Query<'a> {
    /// Splits `query` (what follows `?`, if anything) into pairs.
    pub(super) fn parse(query: Option<&'a str>) -> Self {
        let pairs = query
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
            .map(|p| p.split_once('=').unwrap_or((p, "")))
            .collect();
        Query { pairs }
    }

    fn get(&self, key: &str) -> Option<&'a str> {
        self.pairs.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    /// `seconds`: a whole number from 1 to `max`, or `min(30, max)` when
    /// absent.
    pub(super) fn seconds(&self, max: u64) -> Result<u64, String> {
        let Some(text) = self.get("seconds") else {
            return Ok(30.min(max));
        };
        match text.parse::<u64>() {
            Ok(n) if (1..=max).contains(&n) => Ok(n),
            Ok(n) => Err(format!("seconds={n} is out of range: from 1 to {max}")),
            Err(_) => Err(format!(
                "seconds={} is not a whole number of seconds (from 1 to {max})",
                printable(text)
            )),
        }
    }

    /// `debug`: 0, 1 or 2; 0 when absent.
    pub(super) fn debug(&self) -> Result<u8, String> {
        match self.get("debug") {
            None | Some("0") => Ok(0),
            Some("1") => Ok(1),
            Some("2") => Ok(2),
            Some(other) => Err(format!("debug={} is not 0, 1 or 2", printable(other))),
        }
    }

    /// `format`: one of `choices`, the first when absent.
    pub(super) fn format(&self, choices: &[&'static str]) -> Result<&'static str, String> {
        match self.get("format") {
            None => Ok(choices[0]),
            Some(f) => choices.iter().find(|c| **c == f).copied().ok_or_else(|| {
                format!(
                    "format={} is not one of {}",
                    printable(f),
                    choices.join(", ")
                )
            }),
        }
    }
}

/// `text` cut to 40 characters, control characters replaced, so that a
/// reason stays one short line.
fn printable(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(40)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if text.chars().count() > 40 {
        out.push_str("...");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::Query;

    #[test]
    fn seconds_default_range_and_reasons() {
        assert_eq!(Query::parse(None).seconds(60), Ok(30));
        assert_eq!(Query::parse(None).seconds(10), Ok(10));
        assert_eq!(Query::parse(Some("seconds=2&x")).seconds(60), Ok(2));
        assert_eq!(
            Query::parse(Some("seconds=61")).seconds(60),
            Err("seconds=61 is out of range: from 1 to 60".to_owned())
        );
        assert_eq!(
            Query::parse(Some("seconds=0")).seconds(60),
            Err("seconds=0 is out of range: from 1 to 60".to_owned())
        );
        assert_eq!(
            Query::parse(Some("seconds=1.5")).seconds(60),
            Err("seconds=1.5 is not a whole number of seconds (from 1 to 60)".to_owned())
        );
    }

    #[test]
    fn debug_and_format() {
        assert_eq!(Query::parse(Some("debug=2")).debug(), Ok(2));
        assert_eq!(Query::parse(Some("debug=0")).debug(), Ok(0));
        assert_eq!(
            Query::parse(Some("debug=%0A")).debug(),
            Err("debug=%0A is not 0, 1 or 2".to_owned())
        );
        assert_eq!(Query::parse(None).format(&["dot", "json"]), Ok("dot"));
        assert_eq!(
            Query::parse(Some("format=svg")).format(&["dot", "json"]),
            Err("format=svg is not one of dot, json".to_owned())
        );
    }
}
