//! Which response statuses count as success (`--expect-status 200-299,404`, a scenario step's
//! `expect: { status: ... }`): every other status makes a failed request of class `status`, as
//! k6's `expected_response` and Artillery's `expect` decide it. The default is 200-399.

/// A set of statuses as inclusive ranges, in the order given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet {
    ranges: Vec<(u16, u16)>,
}

impl Default for StatusSet {
    /// 200-399: success and redirects, as ab's "Non-2xx responses" and k6 count it.
    fn default() -> Self {
        StatusSet { ranges: vec![(200, 399)] }
    }
}

impl StatusSet {
    /// One status alone.
    pub fn one(status: u16) -> StatusSet {
        StatusSet { ranges: vec![(status, status)] }
    }

    /// Reads `200-299,404` (ranges and single codes, comma-separated; codes 100 to 599).
    pub fn parse(text: &str) -> Result<StatusSet, String> {
        let code = |s: &str| -> Result<u16, String> {
            let s = s.trim();
            match s.parse::<u16>() {
                Ok(c) if (100..=599).contains(&c) => Ok(c),
                _ => Err(format!("{s:?} is not a status code (100 to 599)")),
            }
        };
        let mut ranges = Vec::new();
        for part in text.split(',') {
            if part.trim().is_empty() {
                return Err(format!("{text:?}: an empty entry; give codes and ranges like 200-299,404"));
            }
            let range = match part.split_once('-') {
                Some((a, b)) => (code(a)?, code(b)?),
                None => {
                    let c = code(part)?;
                    (c, c)
                }
            };
            if range.0 > range.1 {
                return Err(format!("{:?}: a range runs from the lower code to the higher", part.trim()));
            }
            ranges.push(range);
        }
        Ok(StatusSet { ranges })
    }

    /// Whether a response of `status` is a success.
    pub fn contains(&self, status: u16) -> bool {
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&status))
    }
}

impl std::fmt::Display for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if a == b {
                write!(f, "{a}")?;
            } else {
                write!(f, "{a}-{b}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_read_and_decide() {
        // (text, in the set, not in the set)
        let rows: [(&str, &[u16], &[u16]); 4] = [
            // The default's reading.
            ("200-399", &[200, 302, 399], &[199, 400, 500]),
            // A range and a single code.
            ("200-299,404", &[200, 299, 404], &[300, 403, 500]),
            // Spaces around entries are fine.
            (" 500 , 201 ", &[500, 201], &[200]),
            // One code.
            ("204", &[204], &[200]),
        ];
        for (text, yes, no) in rows {
            let s = StatusSet::parse(text).unwrap();
            assert!(yes.iter().all(|c| s.contains(*c)), "{text}");
            assert!(no.iter().all(|c| !s.contains(*c)), "{text}");
        }
        assert_eq!(StatusSet::parse("200-299,404").unwrap().to_string(), "200-299,404");
        assert_eq!(StatusSet::default().to_string(), "200-399");
        assert!(StatusSet::default() == StatusSet::parse("200-399").unwrap());
    }

    #[test]
    fn bad_sets_say_why() {
        for (text, why) in [
            ("", "empty entry"),
            ("200,,300", "empty entry"),
            ("2xx", "not a status code"),
            ("99", "not a status code"),
            ("600", "not a status code"),
            ("300-200", "lower code to the higher"),
            ("200-", "not a status code"),
        ] {
            let e = StatusSet::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }
}
