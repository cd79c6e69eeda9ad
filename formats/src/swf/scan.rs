//! The fast path of the SWF parser. Nearly every job line of the archive's
//! traces is 18 small integers separated by spaces, about 100 bytes. Such a
//! line is recognised, and its wanted fields read, from bit masks over the
//! bytes where it starts (one bit a byte: separator, digit, minus, newline),
//! made 16 to 64 bytes at a time, instead of a loop over every byte. A
//! field is then found by counting token starts, and read eight digits at
//! once. The masks are made with SSE2 on every x86_64 processor
//! ([`sse2`]), and a byte at a time elsewhere; the feature `swf-wide` adds
//! AVX2 and AVX-512 readers (`wide`).
//!
//! Anything else (a header or blank-looking line with a `;`, a fraction, an
//! exponent, garbage, a field of more than 15 digits, a line of
//! [`WINDOW`] bytes or more, the file's last line without a newline) is
//! handed back to the general parser, so both paths agree on every input:
//! the fast path only ever sees lines whose meaning is plain.

use super::{SwfJob, FIELDS, MAX_SECONDS, TIME_BITS};

/// Bytes looked at for one line: lines this long or longer take the
/// general path.
pub const WINDOW: usize = 128;
/// Bytes past the window that an eight-digit read may touch.
const SLACK: usize = 8;
/// The largest time the fast path takes; a line with a larger one is the
/// general parser's to refuse, with its message.
const MAX_TIME: u64 = MAX_SECONDS as u64;

/// Whether field `index` (0-based) is a time.
fn is_time(index: u8) -> bool {
    TIME_BITS >> index & 1 == 1
}

/// The fields a reader needs as numbers (bit `n - 1` for field `n`). A
/// reader that needs few of them lets the parser skip converting the rest;
/// every field is still checked to be a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fields(u32);

impl Fields {
    pub const ALL: Fields = Fields((1 << FIELDS) - 1);

    /// The fields numbered (1-based) in `numbers`.
    pub const fn of(numbers: &[usize]) -> Fields {
        let mut bits = 0;
        let mut i = 0;
        while i < numbers.len() {
            assert!(
                numbers[i] >= 1 && numbers[i] <= FIELDS,
                "SWF fields are numbered 1 to 18"
            );
            bits |= 1 << (numbers[i] - 1);
            i += 1;
        }
        Fields(bits)
    }

    /// Whether field `n` (1-based) is wanted.
    pub fn has(self, n: usize) -> bool {
        (1..=FIELDS).contains(&n) && self.0 & (1 << (n - 1)) != 0
    }
}

/// What the fast path made of the line at the start of a buffer.
#[derive(Debug, PartialEq)]
enum Scan {
    /// A job line of plain integers, read into the job; `len` bytes with
    /// its newline.
    Job { len: usize },
    /// Separators only; `len` bytes with its newline.
    Blank { len: usize },
    /// Not for the fast path: parse it with the general parser.
    General,
}

/// One line, as [`lines`] hands it over.
#[derive(Debug, PartialEq)]
pub enum Line<'a> {
    /// A job line of plain integers, already read into the job.
    Job,
    /// Separators only.
    Blank,
    /// Any other line, for the general parser: its bytes without the
    /// newline, and whether it had one.
    Other { raw: &'a [u8], ended: bool },
}

/// One bit a byte over a window.
#[derive(Default)]
struct Masks {
    space: u128,
    newline: u128,
    digit: u128,
    minus: u128,
}

type Window = [u8; WINDOW + SLACK];

/// The vector instructions the masks are made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Isa {
    #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
    Avx512Vbmi,
    #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
    Avx512,
    #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
    Avx2,
    #[cfg(target_arch = "x86_64")]
    Sse2,
    /// One byte at a time: other processors, and a reference for tests.
    Portable,
}

impl Isa {
    /// The widest this processor has, or the one named by the environment
    /// variable [`ISA_VARIABLE`] if it has that one (checked once). Forcing
    /// a narrower reader reproduces, on any machine, what a processor
    /// without the wider one reads.
    fn best() -> Isa {
        use std::sync::OnceLock;
        static BEST: OnceLock<Isa> = OnceLock::new();
        *BEST.get_or_init(|| {
            let available = Isa::available();
            let chosen = std::env::var(ISA_VARIABLE)
                .ok()
                .and_then(|name| available.iter().copied().find(|i| i.name() == name));
            chosen.unwrap_or(available[available.len() - 1])
        })
    }

    /// Every one this processor can run, narrowest first.
    fn available() -> Vec<Isa> {
        #[allow(unused_mut)]
        let mut all = vec![Isa::Portable];
        #[cfg(target_arch = "x86_64")]
        {
            all.push(Isa::Sse2);
            #[cfg(feature = "swf-wide")]
            if avx2() {
                all.push(Isa::Avx2);
            }
            #[cfg(feature = "swf-wide")]
            if avx512() {
                all.push(Isa::Avx512);
                if vbmi() {
                    all.push(Isa::Avx512Vbmi);
                }
            }
        }
        all
    }

    fn name(self) -> &'static str {
        match self {
            #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
            Isa::Avx512Vbmi => "avx512vbmi",
            #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
            Isa::Avx512 => "avx512",
            #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => "sse2",
            Isa::Portable => "portable",
        }
    }
}

/// Names the reader to use (`portable`, `sse2`, and with the feature
/// `swf-wide` `avx2`, `avx512` or `avx512vbmi`) when the processor has it; unset, or naming one it lacks,
/// the widest it has.
pub const ISA_VARIABLE: &str = "CLEMU_SWF_ISA";

/// Whether the processor has the AVX-512 subsets the `avx512` reader uses
/// (every AVX-512 processor with BW has the others too).
#[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
fn avx512() -> bool {
    std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512bw")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512cd")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Whether the processor, having what [`avx512`] asks for, also has the
/// byte permutations and compression (Ice Lake and later, Zen 4).
#[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
fn vbmi() -> bool {
    std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
}

/// Whether the processor has AVX2 and the bit instructions that came with
/// it (every AVX2 processor does; PDEP is left out, slow on some).
#[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
fn avx2() -> bool {
    std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("lzcnt")
        && std::arch::is_x86_feature_detected!("popcnt")
}

/// Goes through the lines of `text` in order and hands each to `visit`:
/// a plain job line is read into `job` first (its wanted fields; the
/// others are left as they were).
pub fn lines(
    text: &[u8],
    wanted: Fields,
    job: &mut SwfJob,
    visit: impl FnMut(Line<'_>, &mut SwfJob),
) {
    // SAFETY: `best` picks from what `available` found on this processor.
    unsafe { lines_on(Isa::best(), text, wanted, job, visit) }
}

/// [`lines`] with the reader `isa`.
///
/// # Safety
///
/// The processor has the instructions of `isa`: it is one that
/// [`Isa::available`] returned.
unsafe fn lines_on(
    isa: Isa,
    text: &[u8],
    wanted: Fields,
    job: &mut SwfJob,
    visit: impl FnMut(Line<'_>, &mut SwfJob),
) {
    // SAFETY (each arm): the caller's promise.
    match isa {
        #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
        Isa::Avx512Vbmi => unsafe { wide::lines_avx512vbmi(text, wanted, job, visit) },
        #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
        Isa::Avx512 => unsafe { wide::lines_avx512(text, wanted, job, visit) },
        #[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
        Isa::Avx2 => unsafe { wide::lines_avx2(text, wanted, job, visit) },
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => unsafe { sse2::lines_sse2(text, wanted, job, visit) },
        Isa::Portable => lines_with(text, job, visit, masks_portable, |w, starts, space, job| {
            convert_scalar(w, &find_by_walking(starts, wanted), space, job)
        }),
    }
}

/// The loop over lines, given a way to make the masks and to read the
/// wanted fields. Inlined into a function per instruction set, so that
/// everything in it (the caller's visitor included) is built for that set.
#[inline(always)]
fn lines_with(
    text: &[u8],
    job: &mut SwfJob,
    mut visit: impl FnMut(Line<'_>, &mut SwfJob),
    masks: impl Fn(&Window) -> Masks,
    read: impl Fn(&Window, u128, u128, &mut SwfJob) -> bool,
) {
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        let scan = if rest.len() >= WINDOW + SLACK {
            let window: &Window = rest[..WINDOW + SLACK]
                .try_into()
                .expect("the slice is WINDOW + SLACK bytes long");
            line_with(window, job, &masks, &read)
        } else {
            // Near the end of the buffer: a copy padded with NULs, which
            // are separators and never a newline, so the line is still seen
            // whole or not at all.
            let mut window = [0u8; WINDOW + SLACK];
            window[..rest.len()].copy_from_slice(rest);
            line_with(&window, job, &masks, &read)
        };
        match scan {
            Scan::Job { len } => {
                visit(Line::Job, job);
                at += len;
            }
            Scan::Blank { len } => {
                visit(Line::Blank, job);
                at += len;
            }
            Scan::General => {
                let (raw, len, ended) = match memchr::memchr(b'\n', rest) {
                    Some(i) => (&rest[..i], i + 1, true),
                    None => (rest, rest.len(), false),
                };
                visit(Line::Other { raw, ended }, job);
                at += len;
            }
        }
    }
}

/// Where the wanted fields of a plain line start (a minus included).
struct Spans {
    field: [u8; FIELDS],
    at: [u8; FIELDS],
    n: usize,
}

/// The line reader proper, given a way to make the masks and a way to read
/// the wanted fields from the window and its masks of token starts and of
/// separators (false: a field too long for the fast path, or a time out of
/// range).
#[inline(always)]
fn line_with(
    w: &Window,
    job: &mut SwfJob,
    masks: impl Fn(&Window) -> Masks,
    read: impl Fn(&Window, u128, u128, &mut SwfJob) -> bool,
) -> Scan {
    let m = masks(w);
    if m.newline == 0 {
        return Scan::General;
    }
    let len = m.newline.trailing_zeros() as usize;
    // Past the line's end counts as separator.
    let space = m.space | !((1u128 << len) - 1);
    let tokens = !space;
    if tokens == 0 {
        return Scan::Blank { len: len + 1 };
    }
    let starts = tokens & ((space << 1) | 1);
    let signs = m.minus & starts;
    // A plain line: every token byte a digit, but for a leading minus that
    // a digit follows.
    let odd = (tokens & !m.digit & !signs) | ((signs << 1) & !m.digit);
    if odd != 0 || starts.count_ones() as usize != FIELDS {
        return Scan::General;
    }
    if !read(w, starts, space, job) {
        return Scan::General;
    }
    Scan::Job { len: len + 1 }
}

/// Where the wanted fields start, from the mask of token starts: a walk
/// that clears one start after another.
#[inline(always)]
fn find_by_walking(starts: u128, wanted: Fields) -> Spans {
    let mut spans = Spans {
        field: [0; FIELDS],
        at: [0; FIELDS],
        n: 0,
    };
    let mut rest = starts;
    let mut field = 0;
    let mut want = wanted.0;
    while want != 0 {
        let next = want.trailing_zeros();
        want &= want - 1;
        while field < next {
            rest &= rest - 1;
            field += 1;
        }
        spans.field[spans.n] = next as u8;
        spans.at[spans.n] = rest.trailing_zeros() as u8;
        spans.n += 1;
    }
    spans
}

/// Reads the wanted fields one at a time. `space` is the line's separator
/// mask.
#[inline(always)]
fn convert_scalar(w: &Window, spans: &Spans, space: u128, job: &mut SwfJob) -> bool {
    for i in 0..spans.n {
        let at = usize::from(spans.at[i]);
        let neg = w[at] == b'-';
        let from = at + usize::from(neg);
        let word = word_at(w, from);
        // The token's bytes are digits and separators are at most 0x20
        // (checked above), so a byte is a digit exactly when both of its
        // 0x30 bits are set: the first that is not ends the token.
        let t = word & 0x3030_3030_3030_3030;
        let after = !((t >> 4) & (t >> 5)) & 0x0101_0101_0101_0101;
        let v = if after != 0 {
            digits_of(word, after.trailing_zeros() as usize / 8)
        } else {
            let digits = (space >> from).trailing_zeros() as usize;
            if digits > 15 {
                return false;
            }
            let head = digits - 8;
            if head == 0 {
                digits_of(word, 8)
            } else {
                digits_of(word, head) * 100_000_000 + digits_of(word_at(w, from + head), 8)
            }
        };
        if v > MAX_TIME && is_time(spans.field[i]) {
            return false;
        }
        // As the general parser does: negate the integer, then convert
        // ("-0" is 0.0).
        let v = v as i64;
        job.fields[usize::from(spans.field[i])] = if neg { -v } else { v } as f64;
    }
    true
}

/// The eight bytes at `w[at..]` as one little-endian word: the first byte
/// is the lowest.
fn word_at(w: &Window, at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&w[at..at + 8]);
    u64::from_le_bytes(bytes)
}

/// The number written by the first `n` (1 to 8) bytes of `word`, ASCII
/// digits, all at once.
fn digits_of(word: u64, n: usize) -> u64 {
    debug_assert!((1..=8).contains(&n));
    // Digit values; the bytes after the n digits (a borrow may run into
    // them) are shifted out, which leaves leading zeros below.
    let v = word.wrapping_sub(0x3030_3030_3030_3030) << (8 * (8 - n));
    // Pairs of digits, then fours, then all eight: each step multiplies
    // neighbours into one lane.
    let v = ((v & 0x0f0f_0f0f_0f0f_0f0f).wrapping_mul(10 * 256 + 1)) >> 8;
    let v = ((v & 0x00ff_00ff_00ff_00ff).wrapping_mul(100 * 65_536 + 1)) >> 16;
    ((v & 0x0000_ffff_0000_ffff).wrapping_mul(10_000 * (1 << 32) + 1)) >> 32
}

#[cfg(target_arch = "x86_64")]
mod sse2;
#[cfg(all(target_arch = "x86_64", feature = "swf-wide"))]
mod wide;

fn masks_portable(w: &Window) -> Masks {
    let mut m = Masks::default();
    for (i, &b) in w[..WINDOW].iter().enumerate() {
        let bit = 1u128 << i;
        if b <= b' ' {
            m.space |= bit;
        }
        if b.is_ascii_digit() {
            m.digit |= bit;
        }
        if b == b'\n' {
            m.newline |= bit;
        }
        if b == b'-' {
            m.minus |= bit;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn blank_job() -> SwfJob {
        SwfJob {
            line: 0,
            fields: [f64::NAN; FIELDS],
        }
    }

    /// What each available instruction set makes of the first line of
    /// `text`: whether it was read as a job, and the job. All must agree.
    fn first_line(text: &[u8], wanted: Fields) -> (String, SwfJob) {
        let mut seen: Option<(String, SwfJob)> = None;
        for isa in Isa::available() {
            let mut job = blank_job();
            let mut first = None;
            // SAFETY: `available` found the reader on this processor.
            unsafe {
                lines_on(isa, text, wanted, &mut job, |l, j| {
                    if first.is_none() {
                        first = Some((format!("{l:?}"), *j));
                    }
                })
            };
            let first = first.expect("the text has a line");
            if let Some(s) = &seen {
                assert_eq!(s.0, first.0, "{isa:?}");
                assert_eq!(format!("{:?}", s.1), format!("{:?}", first.1), "{isa:?}");
            }
            seen = Some(first);
        }
        seen.expect("some instruction set is available")
    }

    #[test]
    fn digits_of_reads_every_length() {
        for s in [
            "7", "80", "123", "4096", "65536", "259200", "1024000", "99999999", "00000012",
        ] {
            let mut w = [b' '; WINDOW + SLACK];
            w[3..3 + s.len()].copy_from_slice(s.as_bytes());
            assert_eq!(
                digits_of(word_at(&w, 3), s.len()),
                s.parse::<u64>().unwrap(),
                "{s}"
            );
        }
    }

    #[test]
    fn a_plain_line_and_what_is_not() {
        let plain = b"    1   0  10  100  4 -1 -1  4  200 -1  1 1 1 -1 1 -1 -1 -1\nnext";
        let (kind, j) = first_line(plain, Fields::ALL);
        assert_eq!(kind, "Job");
        assert_eq!(j.fields[..6], [1.0, 0.0, 10.0, 100.0, 4.0, -1.0]);
        let (kind, j) = first_line(plain, Fields::of(&[2, 4]));
        assert_eq!(kind, "Job");
        assert_eq!(j.fields[1], 0.0);
        assert_eq!(j.fields[3], 100.0);
        assert!(
            j.fields[0].is_nan() && j.fields[2].is_nan(),
            "unwanted fields are left"
        );
        assert_eq!(first_line(b" \t\r\n1", Fields::ALL).0, "Blank");
        for other in [
            &b"; MaxProcs: 128\n"[..],
            b"1 2.5 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n",
            b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17\n",
            b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19\n",
            b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 1-8\n",
            b"1 - 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n",
            b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 1234567890123456\n",
            b"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18",
        ] {
            let (kind, _) = first_line(other, Fields::ALL);
            assert!(kind.starts_with("Other"), "{other:?}: {kind}");
        }
        // A wanted time past `MAX_SECONDS` is the general parser's to
        // refuse, with its message; any other large field is read.
        let far = b"1 2 3000000001 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n";
        assert!(first_line(far, Fields::ALL).0.starts_with("Other"));
        assert!(first_line(far, Fields::of(&[3])).0.starts_with("Other"));
        assert_eq!(first_line(far, Fields::of(&[2, 4])).0, "Job");
        let (kind, j) = first_line(
            b"3000000001 2 -3000000000 4 5 6 7 8 9 999999999999 11 12 13 14 15 16 17 18\n",
            Fields::ALL,
        );
        assert_eq!(kind, "Job");
        assert_eq!((j.fields[0], j.fields[2]), (3_000_000_001.0, -3e9));
        let long = format!(
            "{}1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n",
            " ".repeat(90)
        );
        assert!(first_line(long.as_bytes(), Fields::ALL)
            .0
            .starts_with("Other"));
    }

    /// Tokens the archive's files hold, and some they should not.
    fn token() -> impl Strategy<Value = String> {
        prop_oneof![
            6 => (0u64..100_000_000).prop_map(|v| v.to_string()),
            1 => (MAX_TIME - 3..MAX_TIME + 3).prop_map(|v| v.to_string()),
            2 => Just("-1".to_string()),
            1 => (0u64..1_000_000_000_000_000).prop_map(|v| v.to_string()),
            1 => "-?[0-9]{1,17}",
            1 => "[-0-9.e+x;]{1,6}",
        ]
    }

    fn separator() -> impl Strategy<Value = String> {
        // Any byte up to 0x20 but the newline separates fields.
        prop_oneof![4 => " {1,6}", 1 => "[\x00-\x09\x0b-\x20]{1,3}"]
    }

    proptest! {
        /// Whatever the fast path accepts, the general parser reads the
        /// same way; and it accepts the plain lines it is made for.
        #[test]
        fn agrees_with_the_general_parser(
            tokens in prop::collection::vec((separator(), token()), 16..20),
            tail in separator(),
            bits in 0u32..(1 << FIELDS),
        ) {
            let mut text: String = tokens.iter().map(|(s, t)| format!("{s}{t}")).collect();
            text.push_str(&tail);
            let body = text.clone();
            text.push('\n');
            text.push_str("1 2 3\n");
            let wanted = Fields(bits);
            let mut general = blank_job();
            let read = super::super::parse_fields_into(body.trim().as_bytes(), 1, &mut general);
            // What the fast path leaves to the general parser to refuse.
            let far = (1..=FIELDS).any(|n| {
                wanted.has(n) && is_time(n as u8 - 1) && general.fields[n - 1].abs() > MAX_SECONDS
            });
            let (kind, fast) = first_line(text.as_bytes(), wanted);
            if kind == "Job" {
                prop_assert!(read.is_ok(), "the general parser reads what the fast path did");
                prop_assert!(!far, "a wanted time out of range took the fast path");
                for n in 1..=FIELDS {
                    if wanted.has(n) {
                        prop_assert_eq!(fast.fields[n - 1].to_bits(), general.fields[n - 1].to_bits(), "field {}", n);
                    } else {
                        prop_assert!(fast.fields[n - 1].is_nan());
                    }
                }
            } else {
                prop_assert!(kind.starts_with("Other"), "a line of numbers is not blank");
                let plain = tokens.len() == FIELDS
                    && !far
                    && body.len() < WINDOW
                    && tokens.iter().all(|(_, t)| {
                        let d = t.strip_prefix('-').unwrap_or(t);
                        !d.is_empty() && d.len() <= 15 && d.bytes().all(|b| b.is_ascii_digit())
                    });
                prop_assert!(!plain, "a plain line took the general path: {:?}", body);
            }
        }
    }
}
