//! How results are printed: aligned tables for people, JSON for scripts.
//!
//! Everything memoctl prints goes through `out!`, `outln!` and
//! `errln!` (the crate denies `print!` and friends): a reader that went
//! away (`memoctl show RUN | head`) ends the process quietly, as it ends a
//! Unix tool, instead of a panic.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write as _};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `print!` to stdout; see [`write_stdout`]. (Used in this module only.)
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::write_stdout(::std::format_args!($($arg)*))
    };
}

/// `println!` to stdout; see [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::output::write_stdout(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::write_stdout(::std::format_args!(
            "{}\n",
            ::std::format_args!($($arg)*)
        ))
    };
}

/// `eprintln!` that never panics (a message that cannot be written to
/// stderr is dropped) and prints the message [`escape`]d: errors quote what
/// the store holds.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::write_stderr(&::std::format!($($arg)*))
    };
}

pub(crate) use {errln, outln};

/// Writes to stdout. If stdout is a pipe whose reader closed, the process
/// exits at once with status 0 and prints nothing more (the reader wanted no
/// more output: `memoctl runs | head`); any other failure to write (a full
/// disk) exits with status 1 and the error on stderr. Either way, whatever
/// the command did before printing (a sweep, a signal) is done.
pub(crate) fn write_stdout(args: fmt::Arguments<'_>) {
    if let Err(error) = io::stdout().lock().write_fmt(args) {
        if error.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        errln!("memoctl: error: cannot write to stdout: {error}");
        std::process::exit(1);
    }
}

/// Writes `message`, [`escape`]d, and a line break to stderr; a failure is
/// ignored (there is nowhere left to say so).
pub(crate) fn write_stderr(message: &str) {
    let _ = writeln!(io::stderr().lock(), "{}", escape(message));
}

/// Whether `c` would act on a terminal instead of showing as text: C0 and C1
/// controls and DEL (escape sequences, line breaks, a cleared screen, OSC 8
/// links), the bidirectional overrides, isolates and marks (text shown in
/// another order than it is stored) and the line and paragraph separators.
fn acts_on_a_terminal(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

/// `text` with every character that would act on a terminal written as a
/// Rust escape (`\n`, `\u{1b}`, `\u{202e}`), so that whatever the store
/// holds (a workflow's error, a signal's name, another writer's bytes) shows
/// as text. Every cell and message memoctl prints that comes from the store
/// passes through here: [`Table::row`], [`print_fields`], [`errln!`]; and
/// [`print_json`] escapes the same characters the JSON way.
pub(crate) fn escape(text: &str) -> Cow<'_, str> {
    if !text.chars().any(acts_on_a_terminal) {
        return Cow::Borrowed(text);
    }
    let mut escaped = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acts_on_a_terminal(c) {
            escaped.extend(c.escape_default());
        } else {
            escaped.push(c);
        }
    }
    Cow::Owned(escaped)
}

/// A table whose columns are padded to their widest cell.
#[derive(Debug)]
pub(crate) struct Table {
    header: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&'static str]) -> Table {
        Table {
            header: header.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; each cell is [`escape`]d.
    pub(crate) fn row(&mut self, cells: Vec<String>) {
        let cells = cells
            .into_iter()
            .map(|cell| match escape(&cell) {
                Cow::Borrowed(_) => cell,
                Cow::Owned(escaped) => escaped,
            })
            .collect();
        self.rows.push(cells);
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as lines, with no trailing spaces.
    pub(crate) fn render(&self) -> String {
        let mut widths: Vec<usize> = self.header.iter().map(|h| h.len()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<&str>| {
            let padded: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            padded.join("  ").trim_end().to_string() + "\n"
        };
        let mut out = line(self.header.clone());
        for row in &self.rows {
            out += &line(row.iter().map(String::as_str).collect());
        }
        out
    }

    /// Prints the table, or `empty` if it has no rows.
    pub(crate) fn print_or(&self, empty: &str) {
        if self.is_empty() {
            outln!("{empty}");
        } else {
            out!("{}", self.render());
        }
    }
}

/// Prints `name: value` lines, the values aligned and [`escape`]d.
pub(crate) fn print_fields(fields: &[(&str, String)]) {
    for (name, value) in fields {
        outln!("{:<12} {}", format!("{name}:"), escape(value));
    }
}

/// Prints `value` as pretty JSON, with every character that would act on a
/// terminal escaped: serde_json escapes the C0 controls in strings, and the
/// others (DEL, C1, bidirectional and separators, never part of JSON's own
/// syntax) are written as `\uXXXX` here, which JSON reads as the same
/// string.
pub(crate) fn print_json(value: &serde_json::Value) {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if c > '\u{1f}' && acts_on_a_terminal(c) {
            escaped.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            escaped.push(c);
        }
    }
    outln!("{escaped}");
}

/// The last millisecond RFC 3339 can write: 9999-12-31T23:59:59.999Z.
const LAST_RFC3339_MS: u64 = 253_402_300_799_999;

/// Milliseconds since the Unix epoch as an RFC 3339 time, to the second; a
/// time past the year 9999, which RFC 3339 cannot write (often microseconds
/// written as milliseconds by mistake), as its raw milliseconds.
pub(crate) fn time(ms: u64) -> String {
    if ms > LAST_RFC3339_MS {
        return format!("{ms} ms since the epoch");
    }
    humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

/// The current time in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A duration in milliseconds, to the second (`3h 2m 5s`).
pub(crate) fn duration(ms: u64) -> String {
    humantime::format_duration(Duration::from_secs(ms / 1000)).to_string()
}

/// A retention as an operator writes it: `7d`, `36h`, `90m`, `45s` (in the
/// largest unit that divides it; humantime would say `1month 29days 13h...`
/// for `60d`).
pub(crate) fn retention(retention: Duration) -> String {
    let secs = retention.as_secs();
    let units = [(86_400, "d"), (3_600, "h"), (60, "m")];
    match units
        .iter()
        .find(|&&(unit, _)| secs > 0 && secs.is_multiple_of(unit))
    {
        Some(&(unit, suffix)) => format!("{}{suffix}", secs / unit),
        None => humantime::format_duration(retention).to_string(),
    }
}

/// How deep a payload memoctl shows may nest: serde_json's own limit, so
/// that a script parsing `--json` with it can read every document.
const MAX_PAYLOAD_DEPTH: usize = 128;

/// A stored payload for people: the JSON of its MessagePack (how the
/// workflow runtime encodes inputs, outputs and signals), or its size if it
/// is not MessagePack or nests deeper than [`MAX_PAYLOAD_DEPTH`].
pub(crate) fn payload(bytes: &[u8]) -> serde_json::Value {
    decode_payload(bytes).unwrap_or_else(|shown| {
        serde_json::Value::String(format!("({} bytes, {shown})", bytes.len()))
    })
}

/// A stored payload as the JSON of its MessagePack, or why it is not shown
/// so (`not MessagePack`, or nested deeper than [`MAX_PAYLOAD_DEPTH`]).
pub(crate) fn decode_payload(bytes: &[u8]) -> Result<serde_json::Value, String> {
    use serde::Deserialize as _;

    let mut decoder = rmp_serde::Deserializer::new(std::io::Cursor::new(bytes));
    decoder.set_max_depth(MAX_PAYLOAD_DEPTH);
    let value = serde_json::Value::deserialize(&mut decoder).map_err(|e| match e {
        rmp_serde::decode::Error::DepthLimitExceeded => {
            format!("MessagePack nested deeper than {MAX_PAYLOAD_DEPTH}")
        }
        _ => "not MessagePack".into(),
    })?;
    // Bytes after the first value: not one MessagePack value (raw text
    // such as `hello` starts with a valid one, the integer 104).
    if decoder.position() != bytes.len() as u64 {
        return Err("not MessagePack".into());
    }
    Ok(value)
}

/// [`payload`] on one line, cut to `max` characters.
pub(crate) fn payload_line(bytes: &[u8], max: usize) -> String {
    let text = payload(bytes).to_string();
    if text.chars().count() <= max {
        text
    } else {
        text.chars().take(max.saturating_sub(1)).collect::<String>() + "…"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_pad_every_column_to_its_widest_cell() {
        let mut table = Table::new(&["run", "status"]);
        table.row(vec!["order-1234".into(), "Completed".into()]);
        table.row(vec!["a".into(), "Running".into()]);
        assert_eq!(
            table.render(),
            "run         status\norder-1234  Completed\na           Running\n"
        );
    }

    #[test]
    fn times_past_the_year_9999_are_printed_as_raw_milliseconds() {
        assert_eq!(time(0), "1970-01-01T00:00:00Z");
        assert_eq!(time(LAST_RFC3339_MS), "9999-12-31T23:59:59Z");
        for ms in [LAST_RFC3339_MS + 1, 1_700_000_000_000_000, u64::MAX] {
            assert_eq!(time(ms), format!("{ms} ms since the epoch"));
        }
        // The age of such a marker, or of one dated 1970.
        assert!(!duration(u64::MAX).is_empty());
    }

    #[test]
    fn controls_bidi_overrides_and_separators_are_escaped_and_text_is_kept() {
        assert_eq!(
            escape("a\u{1b}[2J\n\u{9b}\u{7f}\u{202e}\u{2066}\u{2028}b"),
            r"a\u{1b}[2J\n\u{9b}\u{7f}\u{202e}\u{2066}\u{2028}b"
        );
        let text = "Grüße, 東京 \\ \u{1b}";
        assert_eq!(escape(text), "Grüße, 東京 \\ \\u{1b}");
        assert!(matches!(escape("order-1 é"), Cow::Borrowed(_)));
    }

    #[test]
    fn retentions_read_in_their_largest_whole_unit() {
        let secs = Duration::from_secs;
        assert_eq!(retention(secs(60 * 86_400)), "60d");
        assert_eq!(retention(secs(36 * 3_600)), "36h");
        assert_eq!(retention(secs(90 * 60)), "90m");
        assert_eq!(retention(secs(45)), "45s");
        assert_eq!(retention(secs(0)), "0s");
    }

    #[test]
    fn payloads_read_as_json_when_they_are_message_pack() {
        let packed = rmp_serde::to_vec_named(&serde_json::json!({"approved": true})).unwrap();
        assert_eq!(payload_line(&packed, 80), r#"{"approved":true}"#);
        assert_eq!(payload_line(&packed, 8), r#"{"appro…"#);
        assert_eq!(payload_line(&[0xc1], 80), r#""(1 bytes, not MessagePack)""#);
        // Raw text starts with a MessagePack integer (`h` is 104): the
        // bytes after it say it is not one value.
        assert_eq!(
            payload_line(b"hello", 80),
            r#""(5 bytes, not MessagePack)""#
        );
    }
}
