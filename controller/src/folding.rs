//! Folding a job's nodes in the time of their runs, not of their names.
//!
//! A job's nodes are shown and journaled folded (`fn[000000-079487]`).
//! Folding a list of names the general way (`formats::nodeset::fold`)
//! parses every name and checks the result name by name: 60 ms for a job
//! of 80,000 nodes, on the path of its start. But most clusters name their
//! nodes one bracket wide (`vn0001`: letters, one run of digits, perhaps
//! letters), and a job takes them in the config's order. [`Folder`]
//! reads every node's name once, at config load, into its bracket (prefix,
//! suffix, digits) and number; a job's nodes in order, all of one bracket,
//! then fold by comparing numbers: ranges of consecutive numbers, printed
//! as ClusterShell prints them. Anything else (names of several brackets,
//! or with digits besides the bracket, or out of order) goes the general
//! way, so the text is always the general fold's.
//!
//! The nodes of a wide job are mostly runs of consecutive indices, and
//! the config's nodes mostly runs of consecutive numbers: each node knows
//! where its run of the config begins (its segment), so a run of
//! the job's indices that lies in one run of the config folds from its two
//! ends, without reading the nodes between.

/// Each node's place in a one-bracket name.
#[derive(Debug, Clone, Default)]
pub struct Folder {
    /// Brackets: prefix, suffix, digits (the numbers are printed padded
    /// to it).
    brackets: Vec<(String, String, usize)>,
    /// Each node's bracket and number; `None` for a name of no single
    /// bracket.
    keys: Vec<Option<(u32, u64)>>,
    /// For each node, the first node of its segment: the longest run of
    /// nodes ending at it, in config order, of its bracket with numbers one
    /// apart. A node of no bracket is a segment of its own.
    segments: Vec<usize>,
}

/// The bracket of a name with exactly one run of digits, no longer than a
/// `u64` holds: its prefix, its suffix, its digits' count and number.
fn bracket(name: &str) -> Option<(&str, &str, usize, u64)> {
    let start = name.find(|c: char| c.is_ascii_digit())?;
    let len = name[start..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(name.len() - start);
    let (prefix, digits, suffix) = (
        &name[..start],
        &name[start..start + len],
        &name[start + len..],
    );
    // A second run of digits makes a name of two dimensions, and a dash
    // may make it read as a range: the general fold knows those.
    if suffix.contains(|c: char| c.is_ascii_digit()) || name.contains('-') || len > 18 {
        return None;
    }
    Some((prefix, suffix, len, digits.parse().ok()?))
}

impl Folder {
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Folder {
        let mut f = Folder::default();
        let mut index = std::collections::HashMap::new();
        for name in names {
            let key = bracket(name).map(|(prefix, suffix, width, number)| {
                // A config's names come in runs of one bracket: the last
                // node's is found without a key made for the map.
                if let Some(&Some((b, _))) = f.keys.last() {
                    let (p, s, w) = &f.brackets[b as usize];
                    if (p.as_str(), s.as_str(), *w) == (prefix, suffix, width) {
                        return (b, number);
                    }
                }
                let next = f.brackets.len() as u32;
                let b = *index
                    .entry((prefix.to_string(), suffix.to_string(), width))
                    .or_insert_with(|| {
                        f.brackets
                            .push((prefix.to_string(), suffix.to_string(), width));
                        next
                    });
                (b, number)
            });
            let i = f.keys.len();
            let follows = match (i.checked_sub(1).and_then(|p| f.keys[p]), key) {
                (Some((pb, pn)), Some((b, n))) => pb == b && pn.checked_add(1) == Some(n),
                _ => false,
            };
            let segment = if follows { f.segments[i - 1] } else { i };
            f.keys.push(key);
            f.segments.push(segment);
        }
        f
    }

    /// The nodes `idx` folded, when they are of one bracket and in order
    /// of increasing number; `None` otherwise (the caller folds their
    /// names).
    pub fn fold(&self, idx: impl IntoIterator<Item = usize>) -> Option<String> {
        let mut idx = idx.into_iter();
        let first = idx.next()?;
        let (b, _) = (*self.keys.get(first)?)?;
        // Runs of consecutive numbers, checked as they are made.
        let mut runs: Vec<(u64, u64)> = Vec::new();
        // A run of consecutive indices, from `lo` to `hi`.
        let (mut lo, mut hi) = (first, first);
        for i in idx.chain([usize::MAX]) {
            if i == hi.wrapping_add(1) && i != usize::MAX {
                hi = i;
                continue;
            }
            self.numbers(b, lo, hi, &mut runs)?;
            (lo, hi) = (i, i);
        }
        let (prefix, suffix, width) = &self.brackets[b as usize];
        let mut out = String::with_capacity(prefix.len() + suffix.len() + 2 + runs.len() * 16);
        out.push_str(prefix);
        if let [(lo, hi)] = runs[..] {
            if lo == hi {
                out.push_str(&format!("{lo:0width$}"));
                out.push_str(suffix);
                return Some(out);
            }
        }
        out.push('[');
        for (k, (lo, hi)) in runs.iter().enumerate() {
            if k > 0 {
                out.push(',');
            }
            if lo == hi {
                out.push_str(&format!("{lo:0width$}"));
            } else {
                out.push_str(&format!("{lo:0width$}-{hi:0width$}"));
            }
        }
        out.push(']');
        out.push_str(suffix);
        Some(out)
    }

    /// Adds the numbers of nodes `lo..=hi` (consecutive indices) to
    /// `runs`; `None` if one is of another bracket than `b`, or of none,
    /// or not above the numbers before it.
    fn numbers(&self, b: u32, lo: usize, hi: usize, runs: &mut Vec<(u64, u64)>) -> Option<()> {
        let mut add = |from: u64, to: u64| -> Option<()> {
            match runs.last_mut() {
                Some((_, last)) if from == *last + 1 => *last = to,
                Some((_, last)) if from <= *last => return None,
                _ => runs.push((from, to)),
            }
            Some(())
        };
        // One segment of the config: its numbers are those of its ends.
        if self.segments.get(lo)? == self.segments.get(hi)? {
            let (bl, nl) = (*self.keys.get(lo)?)?;
            let (_, nh) = (*self.keys.get(hi)?)?;
            return if bl == b { add(nl, nh) } else { None };
        }
        for i in lo..=hi {
            let (bi, n) = (*self.keys.get(i)?)?;
            if bi != b {
                return None;
            }
            add(n, n)?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use formats::nodeset;
    use proptest::prelude::*;

    fn general(names: &[String], idx: &[usize]) -> String {
        nodeset::fold(idx.iter().map(|&i| names[i].as_str()))
    }

    /// As `config::Cluster::fold` folds.
    fn fold(f: &Folder, names: &[&str], idx: &[usize]) -> String {
        f.fold(idx.iter().copied())
            .unwrap_or_else(|| nodeset::fold(idx.iter().map(|&i| names[i])))
    }

    #[test]
    fn a_wide_job_folds_to_its_runs() {
        let names: Vec<String> = (0..200_000).map(|i| format!("fn{i:06}")).collect();
        let f = Folder::new(names.iter().map(String::as_str));
        let idx: Vec<usize> = (0..79_488).collect();
        assert_eq!(f.fold(idx).unwrap(), "fn[000000-079487]");
        assert_eq!(f.fold([5]).unwrap(), "fn000005");
        assert_eq!(f.fold([1, 2, 4]).unwrap(), "fn[000001-000002,000004]");
        // Out of order, or of a name of two dimensions: the general way.
        assert_eq!(f.fold([2, 1]), None);
        let odd = Folder::new(["r1n01", "r1n02"]);
        assert_eq!(odd.fold([0, 1]), None);
    }

    fn names_of(kind: u8, n: usize) -> Vec<String> {
        (0..n)
            .map(|i| match kind {
                0 => format!("vn{i:04}"),
                1 => format!("node{i}"),
                2 => format!("c{i:03}-x"),
                3 => format!("rack{}n{:02}", i / 8, i % 8),
                4 => format!("a{i:02}b"),
                // Numbered out of order, with gaps: runs of the config's
                // order that are not runs of numbers.
                5 if (i / 10) % 2 == 0 => format!("n{:04}", i + i / 13),
                5 => format!("n{:04}", 1000 - i),
                _ => {
                    if i % 3 == 0 {
                        format!("gpu{i:03}")
                    } else {
                        format!("cpu{i:03}")
                    }
                }
            })
            .collect()
    }

    proptest! {
        /// Whatever the names and the nodes taken, the text is the
        /// general fold's.
        #[test]
        fn the_same_text_as_the_general_fold(
            kind in 0u8..7,
            n in 1usize..300,
            picks in proptest::collection::vec((0usize..300, 0usize..40), 1..40),
            sorted in any::<bool>(),
        ) {
            let names = names_of(kind, n);
            let f = Folder::new(names.iter().map(String::as_str));
            // Runs of consecutive nodes, as a wide job takes them.
            let mut idx: Vec<usize> = picks
                .into_iter()
                .flat_map(|(p, len)| (p..p + len + 1).map(move |i| i % n))
                .collect();
            if sorted {
                idx.sort_unstable();
                idx.dedup();
            }
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            prop_assert_eq!(fold(&f, &refs, &idx), general(&names, &idx));
        }
    }
}
