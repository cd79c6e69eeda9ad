//! Whether a payload's length agrees with the lengths it holds: a check
//! cheaper than a CRC, so that noise which happens to hold the magic rarely
//! costs one (docs/record-format.md, "Reading a damaged log").

/// The length the version-1 part of a payload claims for itself: 73 fixed
/// bytes, the node name's `k` bytes and 16 per suspension; `None` if that
/// does not fit in the payload.
pub(super) fn v1_len(payload: &[u8]) -> Option<usize> {
    const FIXED: usize = 73;
    let k = u64_at(payload, 12)?;
    if k > payload.len().saturating_sub(FIXED) {
        return None;
    }
    let m = u64_at(payload, 65 + k)?;
    m.checked_mul(16)
        .and_then(|s| s.checked_add(FIXED + k))
        .filter(|&n| n <= payload.len())
}

fn u64_at(payload: &[u8], at: usize) -> Option<usize> {
    let b = payload.get(at..at.checked_add(8)?)?;
    usize::try_from(u64::from_le_bytes(b.try_into().ok()?)).ok()
}

/// Whether a version-1 payload's length agrees with the lengths it holds.
pub(super) fn v1_shape_fits(payload: &[u8]) -> bool {
    v1_len(payload) == Some(payload.len())
}

/// Whether a version-2 payload's length agrees with the lengths it holds:
/// version 1's part, then a count of device entries, each a node name, a
/// kind name (a `u64` length and bytes each) and its ids (a `u64` count and
/// 4 bytes each).
pub(super) fn v2_shape_fits(payload: &[u8]) -> bool {
    v2_len(payload) == Some(payload.len())
}

/// Bytes of a version-3 payload after its devices: how the program ended
/// (kind, value, CPU time, largest resident set).
const PROGRAM_END: usize = 1 + 4 + 8 + 8;

/// Whether a version-3 payload's length agrees with the lengths it holds:
/// version 2's part, then [`PROGRAM_END`] bytes.
pub(super) fn v3_shape_fits(payload: &[u8]) -> bool {
    v2_len(payload).and_then(|n| n.checked_add(PROGRAM_END)) == Some(payload.len())
}

/// The length version 2's part of a payload claims for itself.
fn v2_len(payload: &[u8]) -> Option<usize> {
    let mut at = v1_len(payload)?;
    let entries = u64_at(payload, at)?;
    at += 8;
    for _ in 0..entries {
        for width in [1, 1, 4] {
            let n = u64_at(payload, at)?;
            at = n
                .checked_mul(width)
                .and_then(|b| b.checked_add(at + 8))
                .filter(|&end| end <= payload.len())?;
        }
    }
    Some(at)
}
