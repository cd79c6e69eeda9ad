//! Seconds as people write them on command lines ("12", "0.5",
//! "1700000000.25"), read exactly into integer nanoseconds.
//!
//! Going through `f64` would turn `1700000000.25` into `…249999872` ns;
//! instants that scripts compare deserve better, so decimals are read digit
//! by digit. Exponent notation falls back to `f64`.

/// Parses decimal seconds into nanoseconds: an optional sign, digits, an
/// optional fraction (digits past the ninth are rounded). Returns `None` for
/// anything else or on overflow of `i64`.
pub fn parse_ns(s: &str) -> Option<i64> {
    let s = s.trim();
    if s.contains(['e', 'E']) {
        let f: f64 = s.parse().ok()?;
        let ns = (f * 1e9).round();
        return (f.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64);
    }
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut ns: i128 = 0;
    for b in int.bytes() {
        ns = ns.checked_mul(10)?.checked_add(i128::from(b - b'0'))?;
        if ns > i128::from(i64::MAX) {
            return None;
        }
    }
    ns *= 1_000_000_000;
    let mut scale = 100_000_000;
    for (i, b) in frac.bytes().enumerate() {
        let d = i128::from(b - b'0');
        if i < 9 {
            ns += d * scale;
            scale /= 10;
        } else {
            // Round half up on the tenth digit; later digits cannot matter
            // except to break an exact tie, which we do not bother with.
            if d >= 5 {
                ns += 1;
            }
            break;
        }
    }
    let ns = if neg { -ns } else { ns };
    i64::try_from(ns).ok()
}

#[cfg(test)]
mod tests {
    use super::parse_ns;

    #[test]
    fn exact_decimals() {
        assert_eq!(parse_ns("1700000000.25"), Some(1_700_000_000_250_000_000));
        assert_eq!(parse_ns("0"), Some(0));
        assert_eq!(parse_ns("12"), Some(12_000_000_000));
        assert_eq!(parse_ns(".5"), Some(500_000_000));
        assert_eq!(parse_ns("3."), Some(3_000_000_000));
        assert_eq!(parse_ns("-1.5"), Some(-1_500_000_000));
        assert_eq!(parse_ns("0.0000000015"), Some(2));
        assert_eq!(parse_ns("1e3"), Some(1_000_000_000_000));
    }

    #[test]
    fn rejects() {
        for s in [
            "",
            ".",
            "-",
            "abc",
            "1.2.3",
            "1,5",
            "9223372037",
            "NaN",
            "inf",
            "1e400",
        ] {
            assert_eq!(parse_ns(s), None, "{s:?}");
        }
    }
}
