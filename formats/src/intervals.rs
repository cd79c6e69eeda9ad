//! Sets of resource ids as Batsim writes them: intervals separated by
//! spaces, `"0-3 8"` for 0, 1, 2, 3 and 8. The external-scheduler bridge
//! reads a scheduler's allocations in it; `calcmets export` writes jobs'
//! resources in it.

/// `"0-3 8"` → [0, 1, 2, 3, 8], sorted, each once; every id below
/// `limit` (the resources there are), which is checked before a range is
/// expanded.
pub fn parse(s: &str, limit: u32) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in s.split_whitespace() {
        let bad = || format!("bad interval {part:?} in {s:?}");
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let a: u32 = a.parse().map_err(|_| bad())?;
        let b: u32 = b.parse().map_err(|_| bad())?;
        if b < a {
            return Err(bad());
        }
        if b >= limit {
            return Err(format!(
                "{s:?} names resource {b}, and there are {limit} (0 to {})",
                limit.saturating_sub(1)
            ));
        }
        out.extend(a..=b);
        if out.len() > limit as usize {
            return Err(format!("interval set {s:?} names a resource twice"));
        }
    }
    out.sort_unstable();
    let n = out.len();
    out.dedup();
    if out.len() != n {
        return Err(format!("interval set {s:?} names a resource twice"));
    }
    Ok(out)
}

/// Sorted ids → `"0-3 8"`.
pub fn format(ids: &[u32]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < ids.len() {
        let mut j = i;
        while j + 1 < ids.len() && ids[j + 1] == ids[j] + 1 {
            j += 1;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        if i == j {
            out.push_str(&ids[i].to_string());
        } else {
            out.push_str(&format!("{}-{}", ids[i], ids[j]));
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_sets_round_trip_and_stay_in_bounds() {
        assert_eq!(parse("0-3 8", 9).unwrap(), vec![0, 1, 2, 3, 8]);
        assert_eq!(parse(" 5 1-2 ", 9).unwrap(), vec![1, 2, 5]);
        assert_eq!(format(&[0, 1, 2, 3, 8, 10, 11]), "0-3 8 10-11");
        assert_eq!(format(&[5]), "5");
        assert_eq!(format(&[]), "");
        assert!(parse("3-1", 9).is_err());
        assert!(parse("0-3 2", 9).unwrap_err().contains("twice"));
        assert!(parse("a", 9).unwrap_err().contains("\"a\""));
        assert!(parse("8", 8).unwrap_err().contains("there are 8"));
        // A range far past the resources is refused before it is expanded.
        assert!(parse("0-4294967295", 100)
            .unwrap_err()
            .contains("resource 4294967295"));
        // As are overlapping ranges that would add up past them.
        assert!(parse("0-99 0-99 0-99", 100).unwrap_err().contains("twice"));
    }
}
