//! What went wrong, as a value: every fallible step of bolide returns a [`Problem`] (what is
//! wrong, the flag or file it came from, what to do about it) up to the command, and the command
//! prints it in one place ([`Problem::print`]) and picks the exit code. No room below `app` writes
//! an error line of its own for a problem it returns.
//!
//! A `Problem` is made from a `String` or `&str` (`?` converts), so a parser that only knows its
//! words returns them, and the caller adds where they came from ([`Problem::context`],
//! [`Problem::flag`]) and what to do ([`Problem::hint`]).

use std::fmt;

/// One problem bolide reports to its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// What is wrong, in a sentence without a leading "error:".
    pub what: String,
    /// The flag, file or scenario position it came from (`--rate`, `scenario.yml:3:7`), shown
    /// before `what`.
    pub flag: Option<String>,
    /// What to do about it, shown on a line of its own after `what`.
    pub hint: Option<String>,
}

impl Problem {
    /// A problem in these words.
    pub fn new(what: impl Into<String>) -> Problem {
        Problem { what: what.into(), flag: None, hint: None }
    }

    /// The flag, file or position the problem came from.
    pub fn flag(mut self, flag: impl Into<String>) -> Problem {
        self.flag = Some(flag.into());
        self
    }

    /// What the user can do about it.
    pub fn hint(mut self, hint: impl Into<String>) -> Problem {
        self.hint = Some(hint.into());
        self
    }

    /// The problem with what the caller was doing put before its words: `reading x.json: ...`.
    pub fn context(mut self, doing: impl fmt::Display) -> Problem {
        self.what = format!("{doing}: {}", self.what);
        self
    }

    /// Writes the problem as people read it (`error: ...`, then the hint), the one place a
    /// command's problem is printed.
    pub fn print(&self, err: &mut dyn std::io::Write) {
        let _ = writeln!(err, "error: {self}");
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Words that already say "error:" (a parser's own) are not said twice.
        let what = self.what.trim_start_matches("error: ").trim_end();
        match &self.flag {
            Some(flag) => write!(f, "{flag}: {what}")?,
            None => write!(f, "{what}")?,
        }
        if let Some(hint) = &self.hint {
            write!(f, "\n\n  hint: {hint}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problem {}

impl From<String> for Problem {
    fn from(what: String) -> Problem {
        Problem::new(what)
    }
}

impl From<&str> for Problem {
    fn from(what: &str) -> Problem {
        Problem::new(what)
    }
}

impl From<std::io::Error> for Problem {
    fn from(e: std::io::Error) -> Problem {
        Problem::new(e.to_string())
    }
}

/// A problem shown as text where the caller still keeps text (a document's note, a table cell).
impl From<Problem> for String {
    fn from(p: Problem) -> String {
        p.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_reads_as_its_flag_words_and_hint() {
        let p = Problem::new("must be above 0").flag("--rate").hint("try --rate 100");
        assert_eq!(p.to_string(), "--rate: must be above 0\n\n  hint: try --rate 100");
        let mut out = Vec::new();
        Problem::from("error: no target\n").print(&mut out);
        assert_eq!(String::from_utf8(out).unwrap(), "error: no target\n");
    }

    #[test]
    fn context_goes_before_the_words_and_text_converts_both_ways() {
        fn inner() -> Result<(), String> {
            Err("not JSON".into())
        }
        fn outer() -> Result<(), Problem> {
            inner()?;
            Ok(())
        }
        let p = outer().unwrap_err().context("reading a.json");
        assert_eq!(String::from(p), "reading a.json: not JSON");
    }
}
