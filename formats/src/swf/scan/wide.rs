//! The wider readers (feature `swf-wide`, off by default): masks from 32
//! bytes at a time with AVX2 and 64 with AVX-512, and with AVX-512 VBMI the
//! wanted fields of a line fetched and read together, eight lanes at a
//! time, without leaving the vector registers. On a whole archive trace
//! they save a few milliseconds over SSE2 (BENCHMARKS.md), for about 350
//! lines of unsafe code: worth building only where that matters.

use std::arch::x86_64::*;

use super::{
    convert_scalar, find_by_walking, is_time, lines_with, word_at, Fields, Line, Masks, Spans,
    SwfJob, Window, FIELDS, MAX_TIME, WINDOW,
};

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
        let far = _mm512_mask_cmpgt_epu64_mask(time, eights, _mm512_set1_epi64(MAX_TIME as i64));
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
unsafe fn read_vbmi(w: &Window, starts: u128, space: u128, plan: &Plan, job: &mut SwfJob) -> bool {
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
    let at_hi = _mm512_maskz_compress_epi8(starts_hi, _mm512_add_epi8(iota, _mm512_set1_epi8(64)));
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
        let neg =
            _mm512_mask_cmpeq_epi64_mask(round.active, first, _mm512_set1_epi64(i64::from(b'-')));
        if neg != 0 {
            // The digits start one byte on.
            idx = _mm512_mask_add_epi64(idx, neg, idx, _mm512_set1_epi64(0x0101_0101_0101_0101));
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
