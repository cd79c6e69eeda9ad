//! The fast path of the SWF parser. Nearly every job line of the archive's
//! traces is 18 small integers separated by spaces, about 100 bytes. Such a
//! line is recognised, and its wanted fields read, from bit masks over the
//! bytes where it starts (one bit a byte: separator, digit, minus, newline),
//! made 16 to 64 bytes at a time, instead of a loop over every byte. A
//! field is then found by counting token starts, and read eight digits at
//! once; with AVX-512 VBMI, the wanted fields of a line are fetched and
//! read together, eight lanes at a time, without leaving the vector
//! registers.
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
    #[cfg(target_arch = "x86_64")]
    Avx512Vbmi,
    #[cfg(target_arch = "x86_64")]
    Avx512,
    #[cfg(target_arch = "x86_64")]
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
            if avx2() {
                all.push(Isa::Avx2);
            }
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
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512Vbmi => "avx512vbmi",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => "avx512",
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => "avx2",
            #[cfg(target_arch = "x86_64")]
            Isa::Sse2 => "sse2",
            Isa::Portable => "portable",
        }
    }
}

/// Names the reader to use (`portable`, `sse2`, `avx2`, `avx512` or
/// `avx512vbmi`) when the processor has it; unset, or naming one it lacks,
/// the widest it has.
pub const ISA_VARIABLE: &str = "CLEMU_SWF_ISA";

/// Whether the processor has the AVX-512 subsets the `avx512` reader uses
/// (every AVX-512 processor with BW has the others too).
#[cfg(target_arch = "x86_64")]
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
#[cfg(target_arch = "x86_64")]
fn vbmi() -> bool {
    std::arch::is_x86_feature_detected!("avx512vbmi")
        && std::arch::is_x86_feature_detected!("avx512vbmi2")
}

/// Whether the processor has AVX2 and the bit instructions that came with
/// it (every AVX2 processor does; PDEP is left out, slow on some).
#[cfg(target_arch = "x86_64")]
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
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vbmi => unsafe { x86::lines_avx512vbmi(text, wanted, job, visit) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => unsafe { x86::lines_avx512(text, wanted, job, visit) },
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => unsafe { x86::lines_avx2(text, wanted, job, visit) },
        #[cfg(target_arch = "x86_64")]
        Isa::Sse2 => unsafe { x86::lines_sse2(text, wanted, job, visit) },
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
mod x86 {
    //! The masks from 64, 32 or 16 bytes at a time. Unsigned "at most" is
    //! "equal to the minimum" where there is no unsigned compare.
    use super::{
        convert_scalar, find_by_walking, is_time, lines_with, word_at, Fields, Line, Masks, Spans,
        SwfJob, Window, FIELDS, MAX_TIME, WINDOW,
    };
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512cd,bmi1,bmi2,popcnt")]
    pub(super) unsafe fn lines_avx512(
        text: &[u8],
        wanted: Fields,
        job: &mut SwfJob,
        visit: impl FnMut(Line<'_>, &mut SwfJob),
    ) {
        // SAFETY: the caller checked for AVX-512 F, BW, DQ and CD, and BMI2.
        lines_with(
            text,
            job,
            visit,
            |w| unsafe { masks_avx512(w) },
            |w, starts, space, job| unsafe {
                convert_avx512(w, &find_bmi2(starts, wanted), space, job)
            },
        )
    }

    /// Where the wanted fields start: the n-th set bit of the starts mask
    /// for each, found at once by depositing a single bit into the mask
    /// (no chain of bit clears from one field to the next). Only with
    /// AVX-512: the processors that have it have a fast PDEP, unlike some
    /// that have only AVX2.
    #[target_feature(enable = "bmi1,bmi2,popcnt")]
    unsafe fn find_bmi2(starts: u128, wanted: Fields) -> Spans {
        let mut spans = Spans {
            field: [0; FIELDS],
            at: [0; FIELDS],
            n: 0,
        };
        let (lo, hi) = (starts as u64, (starts >> 64) as u64);
        let in_lo = lo.count_ones();
        let mut want = wanted.0;
        while want != 0 {
            let k = want.trailing_zeros();
            want &= want - 1;
            let at = if k < in_lo {
                _pdep_u64(1 << k, lo).trailing_zeros()
            } else {
                64 + _pdep_u64(1 << (k - in_lo), hi).trailing_zeros()
            };
            spans.field[spans.n] = k as u8;
            spans.at[spans.n] = at as u8;
            spans.n += 1;
        }
        spans
    }

    /// Reads up to eight fields at once, one in each 64-bit lane: the
    /// digits counted, shifted to the top of the lane, then combined in
    /// pairs, fours and eights by multiply-adds, and converted. A field of
    /// more than eight digits sends the line to [`convert_scalar`].
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512cd")]
    unsafe fn convert_avx512(w: &Window, spans: &Spans, space: u128, job: &mut SwfJob) -> bool {
        let mut words = [0u64; 8];
        let mut from = [0usize; 8];
        let mut at = 0;
        while at < spans.n {
            let lanes = (spans.n - at).min(8);
            let mut neg = 0u8;
            let mut time = 0u8;
            for i in 0..lanes {
                let start = usize::from(spans.at[at + i]);
                let minus = w[start] == b'-';
                neg |= u8::from(minus) << i;
                time |= u8::from(is_time(spans.field[at + i])) << i;
                from[i] = start + usize::from(minus);
                words[i] = word_at(w, from[i]);
            }
            let active: __mmask8 = if lanes == 8 { 0xff } else { (1 << lanes) - 1 };
            // SAFETY: an unaligned load of the 64 bytes of `words`.
            let v = unsafe { _mm512_loadu_si512(words.as_ptr().cast()) };
            // A byte is a digit when both its 0x30 bits are set (see
            // `convert_scalar`); the lowest byte that is not ends the field.
            let t = _mm512_and_si512(v, _mm512_set1_epi8(0x30));
            let digit = _mm512_and_si512(_mm512_srli_epi64::<4>(t), _mm512_srli_epi64::<5>(t));
            let after = _mm512_andnot_si512(digit, _mm512_set1_epi8(1));
            // Eight digits in a lane: the field must end there.
            let full = _mm512_mask_cmpeq_epi64_mask(active, after, _mm512_setzero_si512());
            let mut longer = full;
            while longer != 0 {
                let i = longer.trailing_zeros() as usize;
                longer &= longer - 1;
                if (space >> (from[i] + 8)) & 1 == 0 {
                    return convert_scalar(w, spans, space, job);
                }
            }
            // SAFETY: the features are this function's own.
            let eights = unsafe { lane_numbers(v, after, full) };
            // The magnitudes, before the signs: out of range as times?
            let far =
                _mm512_mask_cmpgt_epu64_mask(time, eights, _mm512_set1_epi64(MAX_TIME as i64));
            if far != 0 {
                return false;
            }
            let signed = _mm512_mask_sub_epi64(eights, neg, _mm512_setzero_si512(), eights);
            let mut out = [0f64; 8];
            // SAFETY: an unaligned store of the 64 bytes of `out`.
            unsafe { _mm512_storeu_pd(out.as_mut_ptr(), _mm512_cvtepi64_pd(signed)) };
            for (i, v) in out.iter().enumerate().take(lanes) {
                job.fields[usize::from(spans.field[at + i])] = *v;
            }
            at += lanes;
        }
        true
    }

    /// The numbers in the 64-bit lanes of `v`: each lane's ASCII digits
    /// from its lowest byte up to the lowest byte set in `after`, or all
    /// eight in the `full` lanes, shifted to the top of the lane and
    /// combined in pairs, fours and eights by multiply-adds.
    #[inline]
    #[target_feature(enable = "avx512f,avx512bw,avx512cd")]
    unsafe fn lane_numbers(v: __m512i, after: __m512i, full: __mmask8) -> __m512i {
        // Eight times the digit count, from the lowest set bit. (A lane of
        // eight digits has no such bit: 63 - 64 is taken as 64.)
        let lowest = _mm512_and_si512(after, _mm512_sub_epi64(_mm512_setzero_si512(), after));
        let bits = _mm512_mask_mov_epi64(
            _mm512_sub_epi64(_mm512_set1_epi64(63), _mm512_lzcnt_epi64(lowest)),
            full,
            _mm512_set1_epi64(64),
        );
        let d = _mm512_sub_epi8(v, _mm512_set1_epi8(b'0' as i8));
        // Digits to the top of the lane, zeros (leading zeros) below.
        let d = _mm512_sllv_epi64(d, _mm512_sub_epi64(_mm512_set1_epi64(64), bits));
        let pairs = _mm512_maddubs_epi16(d, _mm512_set1_epi16(0x010a));
        let fours = _mm512_madd_epi16(pairs, _mm512_set1_epi32(0x0001_0064));
        _mm512_add_epi64(
            _mm512_mul_epu32(fours, _mm512_set1_epi64(10_000)),
            _mm512_srli_epi64::<32>(fours),
        )
    }

    #[target_feature(
        enable = "avx512f,avx512bw,avx512dq,avx512cd,avx512vbmi,avx512vbmi2,bmi1,bmi2,popcnt"
    )]
    pub(super) unsafe fn lines_avx512vbmi(
        text: &[u8],
        wanted: Fields,
        job: &mut SwfJob,
        visit: impl FnMut(Line<'_>, &mut SwfJob),
    ) {
        // SAFETY (here and in the closures): the caller checked for
        // AVX-512 F, BW, DQ, CD, VBMI and VBMI2, and BMI2.
        let plan = unsafe { Plan::new(wanted) };
        lines_with(
            text,
            job,
            visit,
            |w| unsafe { masks_avx512(w) },
            |w, starts, space, job| unsafe { read_vbmi(w, starts, space, &plan, job) },
        )
    }

    /// The wanted fields, eight to a round of [`read_vbmi`]: made once for
    /// all the lines of a call.
    struct Plan {
        wanted: Fields,
        rounds: [Round; FIELDS.div_ceil(8)],
        n: usize,
    }

    struct Round {
        /// Byte `8 * i + j` is the token number of lane `i`'s field.
        pick: __m512i,
        /// The field of each lane.
        fields: [u8; 8],
        lanes: usize,
        active: __mmask8,
    }

    impl Plan {
        #[target_feature(enable = "avx512f")]
        unsafe fn new(wanted: Fields) -> Plan {
            let mut fields = [0u8; FIELDS];
            let mut n = 0;
            let mut want = wanted.0;
            while want != 0 {
                fields[n] = want.trailing_zeros() as u8;
                want &= want - 1;
                n += 1;
            }
            let round = |from: usize| {
                let lanes = n.saturating_sub(from).min(8);
                let mut pick = [0u8; 64];
                let mut round = Round {
                    pick: _mm512_setzero_si512(),
                    fields: [0; 8],
                    lanes,
                    active: ((1u16 << lanes) - 1) as __mmask8,
                };
                for i in 0..lanes {
                    let field = fields[from + i];
                    round.fields[i] = field;
                    pick[8 * i..8 * i + 8].fill(field);
                }
                // SAFETY: an unaligned load of the 64 bytes of `pick`.
                round.pick = unsafe { _mm512_loadu_si512(pick.as_ptr().cast()) };
                round
            };
            Plan {
                wanted,
                rounds: [round(0), round(8), round(16)],
                n: n.div_ceil(8),
            }
        }
    }

    // `read_vbmi` reads fields of up to eight digits and leaves longer ones,
    // and so every time out of range, to `convert_scalar`.
    const _: () = assert!(MAX_TIME > 99_999_999);

    /// Bytes 0 to 63.
    const IOTA: [u8; 64] = {
        let mut b = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            b[i] = i as u8;
            i += 1;
        }
        b
    };

    /// Reads the wanted fields eight at a time without leaving the vector
    /// registers: the token starts are packed into a list of positions
    /// (token `t` at byte `t`), each lane picks its field's position and
    /// the seven bytes after it, and one byte permutation over the
    /// 128-byte window fetches the eight bytes of every lane. The digits
    /// are then combined by [`lane_numbers`], as in [`convert_avx512`].
    #[target_feature(
        enable = "avx512f,avx512bw,avx512dq,avx512cd,avx512vbmi,avx512vbmi2,bmi1,bmi2,popcnt"
    )]
    unsafe fn read_vbmi(
        w: &Window,
        starts: u128,
        space: u128,
        plan: &Plan,
        job: &mut SwfJob,
    ) -> bool {
        // SAFETY: unaligned loads of 64 bytes within `w` and of `IOTA`.
        let (lo, hi, iota) = unsafe {
            (
                _mm512_loadu_si512(w.as_ptr().cast()),
                _mm512_loadu_si512(w.as_ptr().add(64).cast()),
                _mm512_loadu_si512(IOTA.as_ptr().cast()),
            )
        };
        let (starts_lo, starts_hi) = (starts as u64, (starts >> 64) as u64);
        let in_lo = starts_lo.count_ones();
        let at_lo = _mm512_maskz_compress_epi8(starts_lo, iota);
        let at_hi =
            _mm512_maskz_compress_epi8(starts_hi, _mm512_add_epi8(iota, _mm512_set1_epi8(64)));
        // The second half's positions follow the first's. A plain line has
        // 18 tokens, so `in_lo` is less than 64.
        let at = _mm512_mask_permutexvar_epi8(
            at_lo,
            u64::MAX << in_lo,
            _mm512_sub_epi8(iota, _mm512_set1_epi8(in_lo as i8)),
            at_hi,
        );
        // Lane bytes 0 to 7 of a field: past the window, the permutation
        // wraps around to its start, but only ever for bytes after the
        // field's end (a line ends inside the window), which are not read.
        let ramp = _mm512_set1_epi64(0x0706_0504_0302_0100);
        for round in &plan.rounds[..plan.n] {
            let mut idx = _mm512_add_epi8(_mm512_permutexvar_epi8(round.pick, at), ramp);
            let mut v = _mm512_permutex2var_epi8(lo, idx, hi);
            let first = _mm512_and_si512(v, _mm512_set1_epi64(0xff));
            let neg = _mm512_mask_cmpeq_epi64_mask(
                round.active,
                first,
                _mm512_set1_epi64(i64::from(b'-')),
            );
            if neg != 0 {
                // The digits start one byte on.
                idx =
                    _mm512_mask_add_epi64(idx, neg, idx, _mm512_set1_epi64(0x0101_0101_0101_0101));
                v = _mm512_permutex2var_epi8(lo, idx, hi);
            }
            let t = _mm512_and_si512(v, _mm512_set1_epi8(0x30));
            let digit = _mm512_and_si512(_mm512_srli_epi64::<4>(t), _mm512_srli_epi64::<5>(t));
            let after = _mm512_andnot_si512(digit, _mm512_set1_epi8(1));
            let full = _mm512_mask_cmpeq_epi64_mask(round.active, after, _mm512_setzero_si512());
            if full != 0 {
                // Where each lane's digits start: the low byte of its index.
                let from = _mm_cvtsi128_si64(_mm512_cvtepi64_epi8(idx)) as u64;
                let mut longer = full;
                while longer != 0 {
                    let i = longer.trailing_zeros();
                    longer &= longer - 1;
                    if (space >> ((from >> (8 * i)) as u8 + 8)) & 1 == 0 {
                        // SAFETY: the caller's promise covers BMI2.
                        let spans = unsafe { find_bmi2(starts, plan.wanted) };
                        return convert_scalar(w, &spans, space, job);
                    }
                }
            }
            // SAFETY: the caller's promise covers the features.
            let eights = unsafe { lane_numbers(v, after, full) };
            // No time is out of range here: eight digits at most (longer
            // fields went to `convert_scalar`), and `MAX_TIME` has ten.
            let signed = _mm512_mask_sub_epi64(eights, neg, _mm512_setzero_si512(), eights);
            let mut out = [0f64; 8];
            // SAFETY: an unaligned store of the 64 bytes of `out`.
            unsafe { _mm512_storeu_pd(out.as_mut_ptr(), _mm512_cvtepi64_pd(signed)) };
            for (v, &field) in out.iter().zip(&round.fields).take(round.lanes) {
                job.fields[usize::from(field)] = *v;
            }
        }
        true
    }

    #[target_feature(enable = "avx512bw")]
    unsafe fn masks_avx512(w: &Window) -> Masks {
        let mut m = Masks::default();
        for i in 0..WINDOW / 64 {
            // SAFETY: an unaligned load of 64 bytes within `w`.
            let x = unsafe { _mm512_loadu_si512(w.as_ptr().add(64 * i).cast()) };
            let d = _mm512_sub_epi8(x, _mm512_set1_epi8(b'0' as i8));
            let bits = |k: u64| u128::from(k) << (64 * i);
            m.space |= bits(_mm512_cmple_epu8_mask(x, _mm512_set1_epi8(0x20)));
            m.digit |= bits(_mm512_cmple_epu8_mask(d, _mm512_set1_epi8(9)));
            m.newline |= bits(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(b'\n' as i8)));
            m.minus |= bits(_mm512_cmpeq_epi8_mask(x, _mm512_set1_epi8(b'-' as i8)));
        }
        m
    }

    #[target_feature(enable = "avx2,bmi1,lzcnt,popcnt")]
    pub(super) unsafe fn lines_avx2(
        text: &[u8],
        wanted: Fields,
        job: &mut SwfJob,
        visit: impl FnMut(Line<'_>, &mut SwfJob),
    ) {
        // SAFETY: the caller checked for AVX2, BMI1, LZCNT and POPCNT.
        lines_with(
            text,
            job,
            visit,
            |w| unsafe { masks_avx2(w) },
            |w, starts, space, job| convert_scalar(w, &find_by_walking(starts, wanted), space, job),
        )
    }

    #[target_feature(enable = "avx2")]
    unsafe fn masks_avx2(w: &Window) -> Masks {
        let mut m = Masks::default();
        for i in 0..WINDOW / 32 {
            // SAFETY: an unaligned load of 32 bytes within `w`.
            let x = unsafe { _mm256_loadu_si256(w.as_ptr().add(32 * i).cast()) };
            let d = _mm256_sub_epi8(x, _mm256_set1_epi8(b'0' as i8));
            let bits = |v: __m256i| u128::from(_mm256_movemask_epi8(v) as u32) << (32 * i);
            let space = _mm256_set1_epi8(0x20);
            let nine = _mm256_set1_epi8(9);
            m.space |= bits(_mm256_cmpeq_epi8(_mm256_min_epu8(x, space), x));
            m.digit |= bits(_mm256_cmpeq_epi8(_mm256_min_epu8(d, nine), d));
            m.newline |= bits(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'\n' as i8)));
            m.minus |= bits(_mm256_cmpeq_epi8(x, _mm256_set1_epi8(b'-' as i8)));
        }
        m
    }

    #[target_feature(enable = "sse2")]
    pub(super) unsafe fn lines_sse2(
        text: &[u8],
        wanted: Fields,
        job: &mut SwfJob,
        visit: impl FnMut(Line<'_>, &mut SwfJob),
    ) {
        // SAFETY: every x86_64 processor has SSE2.
        lines_with(
            text,
            job,
            visit,
            |w| unsafe { masks_sse2(w) },
            |w, starts, space, job| convert_scalar(w, &find_by_walking(starts, wanted), space, job),
        )
    }

    #[target_feature(enable = "sse2")]
    unsafe fn masks_sse2(w: &Window) -> Masks {
        let mut m = Masks::default();
        for i in 0..WINDOW / 16 {
            // SAFETY: an unaligned load of 16 bytes within `w`.
            let x = unsafe { _mm_loadu_si128(w.as_ptr().add(16 * i).cast()) };
            let d = _mm_sub_epi8(x, _mm_set1_epi8(b'0' as i8));
            let bits = |v: __m128i| u128::from(_mm_movemask_epi8(v) as u16) << (16 * i);
            let space = _mm_set1_epi8(0x20);
            let nine = _mm_set1_epi8(9);
            m.space |= bits(_mm_cmpeq_epi8(_mm_min_epu8(x, space), x));
            m.digit |= bits(_mm_cmpeq_epi8(_mm_min_epu8(d, nine), d));
            m.newline |= bits(_mm_cmpeq_epi8(x, _mm_set1_epi8(b'\n' as i8)));
            m.minus |= bits(_mm_cmpeq_epi8(x, _mm_set1_epi8(b'-' as i8)));
        }
        m
    }
}

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
