//! Seconds as people write them on command lines ("12", "0.5",
//! "1700000000.25"), read exactly into integer nanoseconds.
//!
//! Going through `f64` would turn `1700000000.25` into `…249999872` ns;
//! instants that scripts compare deserve better, so decimals are read digit
//! by digit. Exponent notation falls back to `f64`.

/// Most seconds that fit in `i64` nanoseconds (about 292 years).
pub const MAX_SECONDS: i64 = i64::MAX / 1_000_000_000;

/// A duration in seconds (`--runtime`, `--tau`, ...), as nanoseconds; the
/// error says what is wrong with it in words a user can act on.
pub fn duration_ns(s: &str) -> Result<u64, String> {
    match parse_ns(s) {
        Some(ns) if ns >= 0 => Ok(ns as u64),
        Some(_) => Err(format!(
            "{:?} is negative: a duration is 0 or more seconds",
            s.trim()
        )),
        None if looks_numeric(s) => Err(format!(
            "{:?} seconds is too long: at most {MAX_SECONDS} s (about 292 years)",
            s.trim()
        )),
        None => Err(format!("{:?} is not a number of seconds", s.trim())),
    }
}

/// Whether `s` reads as a number, however large (so that a value that
/// did not parse was too large, not malformed).
fn looks_numeric(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok_and(|f| !f.is_nan())
}

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
    use super::{duration_ns, parse_ns};

    #[test]
    fn durations_say_what_is_wrong() {
        assert_eq!(duration_ns("2.5"), Ok(2_500_000_000));
        assert_eq!(duration_ns("0"), Ok(0));
        let negative = duration_ns("-5").unwrap_err();
        assert!(negative.contains("negative"), "{negative}");
        for big in ["1e300", "9223372037", "inf"] {
            let e = duration_ns(big).unwrap_err();
            assert!(e.contains("too long"), "{big}: {e}");
        }
        let e = duration_ns("ten").unwrap_err();
        assert!(e.contains("not a number"), "{e}");
    }

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
