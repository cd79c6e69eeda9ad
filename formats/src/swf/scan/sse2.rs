//! The masks from 16 bytes at a time, with SSE2, which every x86_64
//! processor has. Unsigned "at most" is "equal to the minimum", there
//! being no unsigned compare.

use std::arch::x86_64::*;

use super::{
    convert_scalar, find_by_walking, lines_with, Fields, Line, Masks, SwfJob, Window, WINDOW,
};

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
