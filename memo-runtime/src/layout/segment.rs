//! How a run id becomes one path segment, and back: all lower case and one
//! to one, so runs stay apart on a case-insensitive folder.

use crate::run_id::{Incarnation, RunId};

/// The longest run segment written in the short form (the id with its
/// capitals escaped): longer ones are written in the long form.
///
/// The bound comes from the tightest name that holds a segment, a terminal
/// marker's (`<20 digits>_<run>.<16 hex digits>`, 38 bytes besides the
/// segment), on the tightest backend, a local folder (255-byte file names),
/// where `LocalFileSystem` stages every write at `<name>#<counter>` (up to 21
/// more bytes): 255 - 38 - 21 = 196.
pub(crate) const MAX_SHORT_RUN_SEGMENT: usize = 196;

/// What separates a long-form segment's lower-cased id from its case mask:
/// never in a short-form segment, where `=` is always followed by a letter.
const CASE_MASK_SEPARATOR: &str = "==";

/// The path segment of a run id.
///
/// **Short form** (every segment up to [`MAX_SHORT_RUN_SEGMENT`] bytes, which
/// covers every id with at most 68 capitals): the id with every upper-case
/// letter written as `=` and the letter in lower case (`Order-1` is
/// `=order-1`).
///
/// **Long form** (ids with so many capitals that the short form would be
/// longer): the id in lower case, `==`, then its case mask: one bit per
/// letter of the id, in order, 1 for a capital, packed four to a lower-case
/// hex digit (the first letter is the first digit's high bit, the last digit
/// padded with zeros). `ABc` is `abc==c`. At most 128 + 2 + 32 = 162 bytes.
///
/// Either form is all lower case, and the mapping is one-to-one (`=` is not
/// in the run-id alphabet, and `==` appears only in the long form), so two
/// ids that differ only in case get segments that differ in more than case:
/// they stay apart on a case-insensitive folder (macOS, Windows) as
/// everywhere else. Both forms are read back by [`parse_run_segment`], so a
/// listing (markers, status hints) names every run without reading it.
pub(crate) fn run_segment(run_id: &RunId) -> String {
    let id = run_id.as_str();
    let capitals = id.bytes().filter(u8::is_ascii_uppercase).count();
    if id.len() + capitals <= MAX_SHORT_RUN_SEGMENT {
        short_segment(id)
    } else {
        long_segment(id)
    }
}

pub(super) fn short_segment(id: &str) -> String {
    let mut segment = String::with_capacity(id.len() + 4);
    for c in id.chars() {
        if c.is_ascii_uppercase() {
            segment.push('=');
            segment.push(c.to_ascii_lowercase());
        } else {
            segment.push(c);
        }
    }
    segment
}

fn long_segment(id: &str) -> String {
    let letters: Vec<bool> = id
        .bytes()
        .filter(u8::is_ascii_alphabetic)
        .map(|b| b.is_ascii_uppercase())
        .collect();
    let mask = letters.chunks(4).map(|bits| {
        let nibble = bits
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &upper)| n | (u32::from(upper) << (3 - i)));
        char::from_digit(nibble, 16).unwrap_or('0')
    });
    let mut segment = id.to_ascii_lowercase();
    segment.push_str(CASE_MASK_SEPARATOR);
    segment.extend(mask);
    segment
}

/// The run id a [`run_segment`] was made from; `None` for anything else,
/// including a segment in the other form than the one its id is written in
/// (so no two names parse to one run).
pub(crate) fn parse_run_segment(segment: &str) -> Option<RunId> {
    let id = match segment.split_once(CASE_MASK_SEPARATOR) {
        Some((lower, mask)) => parse_long_segment(lower, mask)?,
        None => parse_short_segment(segment)?,
    };
    let run_id = RunId::new(id).ok()?;
    (run_segment(&run_id) == segment).then_some(run_id)
}

fn parse_short_segment(segment: &str) -> Option<String> {
    let mut id = String::with_capacity(segment.len());
    let mut chars = segment.chars();
    while let Some(c) = chars.next() {
        match c {
            '=' => match chars.next() {
                Some(l) if l.is_ascii_lowercase() => id.push(l.to_ascii_uppercase()),
                _ => return None,
            },
            c if c.is_ascii_uppercase() => return None,
            c => id.push(c),
        }
    }
    Some(id)
}

fn parse_long_segment(lower: &str, mask: &str) -> Option<String> {
    let mut bits = Vec::with_capacity(mask.len() * 4);
    for digit in mask.chars() {
        if digit.is_ascii_uppercase() {
            return None;
        }
        let nibble = digit.to_digit(16)?;
        bits.extend((0..4).rev().map(|i| nibble >> i & 1 == 1));
    }
    let mut bits = bits.into_iter();
    let mut id = String::with_capacity(lower.len());
    for c in lower.chars() {
        if c.is_ascii_uppercase() {
            return None;
        }
        if c.is_ascii_alphabetic() && bits.next()? {
            id.push(c.to_ascii_uppercase());
        } else {
            id.push(c);
        }
    }
    // Only padding may be left; a canonical mask is checked by the caller.
    Some(id)
}

/// `<run>.<inc>`: a run incarnation in one file name.
pub(super) fn incarnation_name(run_id: &RunId, incarnation: Incarnation) -> String {
    format!("{}.{incarnation}", run_segment(run_id))
}

/// Parses `<run>.<inc>`.
pub(super) fn parse_incarnation_name(name: &str) -> Option<(RunId, Incarnation)> {
    let (run, incarnation) = name.rsplit_once('.')?;
    Some((
        parse_run_segment(run)?,
        Incarnation::parse_hex(incarnation)?,
    ))
}
