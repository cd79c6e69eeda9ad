//! One metric's distribution over jobs: count, exact sum, maximum and
//! nearest-rank percentiles, in memory that does not grow with the jobs.
//!
//! Values are integer ticks (nanoseconds for times, 1e-9 for ratios), so
//! sums are exact and do not depend on the order jobs arrive in. The first
//! [`EXACT_LIMIT`] values are kept as they are and percentiles over them are
//! exact (unless the caller knows the input is larger, and moves to the
//! histogram at once: a long trace); past that the values move into an HDR
//! histogram with 3
//! significant digits. A percentile is then the middle of the bucket that
//! holds the nearest-rank value (buckets are under 0.1 % wide) rounded to
//! 4 significant digits: within 0.1 % of the exact value, as docs/design.md
//! allows, and whole numbers stay whole.

use hdrhistogram::Histogram;

/// Values kept exactly before switching to the histogram: runs of up to
/// 65,536 jobs get exact percentiles, and memory stays at 512 KiB a metric.
pub const EXACT_LIMIT: usize = 1 << 16;

#[derive(Clone)]
pub struct Dist {
    exact: Vec<i64>,
    hist: Option<Hist>,
    count: u64,
    sum: i128,
    min: i64,
    max: i64,
}

/// The summary docs/design.md asks for, in ticks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantiles {
    pub mean: f64,
    pub p50: i64,
    pub p95: i64,
    pub p99: i64,
    pub max: i64,
}

impl Default for Dist {
    fn default() -> Self {
        Dist {
            exact: Vec::new(),
            hist: None,
            count: 0,
            sum: 0,
            min: i64::MAX,
            max: i64::MIN,
        }
    }
}

impl Dist {
    pub fn add(&mut self, v: i64) {
        self.add_all(&[v]);
    }

    /// Counts every value of `batch`. A caller with many values hands them
    /// over a batch at a time: the histogram's counters then stay in the
    /// cache for the batch, rather than take turns with other metrics'.
    pub fn add_all(&mut self, batch: &[i64]) {
        if batch.is_empty() {
            return;
        }
        self.count += batch.len() as u64;
        for &v in batch {
            self.sum += i128::from(v);
            self.min = self.min.min(v);
            self.max = self.max.max(v);
        }
        match &mut self.hist {
            Some(h) => {
                // Runs of one value count at once: a trace's jobs come in
                // bursts (most waits of a run of jobs are 0, and so many
                // slowdowns are 1).
                let mut run = (batch[0], 0);
                for &v in batch {
                    if v == run.0 {
                        run.1 += 1;
                    } else {
                        h.record(run.0, run.1);
                        run = (v, 1);
                    }
                }
                h.record(run.0, run.1);
            }
            None => {
                self.exact.extend_from_slice(batch);
                if self.exact.len() > EXACT_LIMIT {
                    self.spill();
                }
            }
        }
    }

    /// Moves to the histogram now, for a caller that knows that this
    /// distribution's part and the others it will be merged with hold more
    /// than [`EXACT_LIMIT`] values together: the percentiles will come from
    /// the histogram anyway, and the exact values need not take the memory.
    pub fn to_histogram(&mut self) {
        if self.hist.is_none() {
            self.spill();
        }
    }

    fn spill(&mut self) {
        let mut h = Hist::default();
        for &v in &self.exact {
            h.record(v, 1);
        }
        self.exact = Vec::new();
        self.hist = Some(h);
    }

    /// Takes in everything `other` has seen, as if its values had been
    /// added here (in any order: the result does not depend on it).
    /// `other` is left as it was: one distribution may go into two.
    pub fn merge(&mut self, other: &Dist) {
        self.count += other.count;
        self.sum += other.sum;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        if other.hist.is_some() && self.hist.is_none() {
            self.spill();
        }
        match (&mut self.hist, &other.hist) {
            (Some(h), Some(o)) => h.add(o),
            (Some(h), None) => {
                for &v in &other.exact {
                    h.record(v, 1);
                }
            }
            (None, _) => {
                self.exact.extend_from_slice(&other.exact);
                if self.exact.len() > EXACT_LIMIT {
                    self.spill();
                }
            }
        }
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether percentiles come from the histogram (within 0.1 %).
    pub fn approximate(&self) -> bool {
        self.hist.is_some() || self.exact.len() > EXACT_LIMIT
    }

    /// Mean and nearest-rank percentiles; `None` when empty.
    pub fn quantiles(&mut self) -> Option<Quantiles> {
        if self.count == 0 {
            return None;
        }
        let mean = self.sum as f64 / self.count as f64;
        let (p50, p95, p99) = match &self.hist {
            None => {
                self.exact.sort_unstable();
                let v = &self.exact;
                (
                    v[rank(0.50, v.len()) - 1],
                    v[rank(0.95, v.len()) - 1],
                    v[rank(0.99, v.len()) - 1],
                )
            }
            Some(h) => {
                let [p50, p95, p99] = h.ranks([0.50, 0.95, 0.99], self.min, self.max);
                (p50, p95, p99)
            }
        };
        Some(Quantiles {
            mean,
            p50,
            p95,
            p99,
            max: self.max,
        })
    }
}

/// Where values go past the exact limit: the non-negative ones, and the
/// magnitudes of the negative ones (a submit stamped after the start by a
/// skewed clock), which are rare enough to have a histogram only when
/// there are some.
#[derive(Clone)]
struct Hist {
    pos: Histogram<u32>,
    neg: Option<Histogram<u32>>,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            pos: new_histogram(),
            neg: None,
        }
    }
}

/// Three significant digits, over every value a histogram can take. Its
/// counters are allocated at once but only touched where values fall, and
/// histograms of one layout merge by adding counters (an auto-resizing one
/// would grow by copying while values are recorded, and its parts would
/// merge value by value).
fn new_histogram() -> Histogram<u32> {
    Histogram::new_with_bounds(1, u64::MAX / 2, 3).expect("valid bounds and precision")
}

impl Hist {
    /// Counts `n` times the value `v`.
    fn record(&mut self, v: i64, n: u32) {
        // Only values past u64::MAX / 2 are refused; then the percentiles
        // are over the values the histogram took.
        let _ = if v >= 0 {
            self.pos.record_n(v as u64, n)
        } else {
            self.neg
                .get_or_insert_with(new_histogram)
                .record_n(v.unsigned_abs(), n)
        };
    }

    fn add(&mut self, other: &Hist) {
        // Histograms of one layout take each other's values.
        let _ = self.pos.add(&other.pos);
        if let Some(o) = &other.neg {
            let _ = self.neg.get_or_insert_with(new_histogram).add(o);
        }
    }

    /// The nearest-rank values at the quantiles `qs` (ascending), in one
    /// pass over the buckets: the negative ones from the largest magnitude
    /// down, then the others.
    fn ranks<const N: usize>(&self, qs: [f64; N], min: i64, max: i64) -> [i64; N] {
        let mut out = [max; N];
        if self.neg.is_none() {
            // The histogram's own single pass over its counters, with the
            // nearest rank of `rank` (⌈q·n⌉, at least 1): a plain loop,
            // where walking the recorded buckets steps an iterator for each.
            for (o, v) in out.iter_mut().zip(self.pos.value_at_quantiles(qs)) {
                *o = bucket_value(&self.pos, v).clamp(min, max);
            }
            return out;
        }
        let neg: Vec<(i64, u64)> = match &self.neg {
            Some(h) => h
                .iter_recorded()
                .map(|it| {
                    (
                        -bucket_value(h, it.value_iterated_to()),
                        it.count_at_value().into(),
                    )
                })
                .collect(),
            None => Vec::new(),
        };
        let pos = self.pos.iter_recorded().map(|it| {
            (
                bucket_value(&self.pos, it.value_iterated_to()),
                it.count_at_value().into(),
            )
        });
        let total = self.pos.len() + self.neg.as_ref().map_or(0, |h| h.len());
        let ks = qs.map(|q| rank(q, total as usize) as u64);
        let mut next = 0;
        let mut seen = 0;
        for (v, count) in neg.into_iter().rev().chain(pos) {
            seen += count;
            while next < N && seen >= ks[next] {
                out[next] = v.clamp(min, max);
                next += 1;
            }
            if next == N {
                break;
            }
        }
        out
    }
}

/// The value a bucket stands for: its middle, to four significant digits.
fn bucket_value(h: &Histogram<u32>, v: u64) -> i64 {
    round_sig(h.median_equivalent(v), 4).min(i64::MAX as u64) as i64
}

/// Nearest rank: the k-th smallest of n values, k = max(1, ⌈q·n⌉).
pub fn rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// `v` rounded to `digits` significant digits: the histogram holds three,
/// so a fourth is all that printing more would pretend to know, and an
/// integer-valued input (a trace's whole seconds) comes back whole.
fn round_sig(v: u64, digits: u32) -> u64 {
    let mag = v.checked_ilog10().unwrap_or(0);
    if mag < digits {
        return v;
    }
    let unit = 10u64.pow(mag + 1 - digits);
    (v + unit / 2) / unit * unit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_small() {
        let mut d = Dist::default();
        for v in [5, 1, 4, 2, 3] {
            d.add(v);
        }
        let q = d.quantiles().unwrap();
        assert_eq!(q.mean, 3.0);
        // k = ceil(0.5·5) = 3 → 3; ceil(0.95·5) = 5 → 5.
        assert_eq!((q.p50, q.p95, q.p99, q.max), (3, 5, 5, 5));
        assert_eq!(rank(0.5, 4), 2);
        assert_eq!(rank(0.01, 4), 1);
    }

    #[test]
    fn significant_digits() {
        assert_eq!(round_sig(10_003_415_040, 4), 10_000_000_000);
        assert_eq!(round_sig(48_739_288_875_008, 4), 48_740_000_000_000);
        assert_eq!(round_sig(999, 4), 999);
        assert_eq!(round_sig(99_996, 4), 100_000);
    }

    #[test]
    fn merging_equals_adding_everything_to_one() {
        for (a, b) in [
            (10, 20),
            (EXACT_LIMIT as i64, 10),
            (10, EXACT_LIMIT as i64 + 5),
            (70_000, 70_000),
        ] {
            let mut one = Dist::default();
            let mut left = Dist::default();
            let mut right = Dist::default();
            for v in 0..a {
                one.add(v * 3);
                left.add(v * 3);
            }
            for v in 0..b {
                one.add(v * 7 + 1);
                right.add(v * 7 + 1);
            }
            left.merge(&right);
            assert_eq!(left.count(), one.count());
            assert_eq!(left.approximate(), one.approximate(), "{a} {b}");
            assert_eq!(left.quantiles(), one.quantiles(), "{a} {b}");
        }
    }

    #[test]
    fn moving_to_the_histogram_early_changes_nothing_past_the_limit() {
        let values = |n: i64| (0..n).map(|v| (v * 7_919) % 100_003);
        let mut late = Dist::default();
        let mut early = Dist::default();
        for (i, v) in values(EXACT_LIMIT as i64 + 1_000).enumerate() {
            late.add(v);
            early.add(v);
            if i == 300 {
                early.to_histogram();
            }
        }
        assert!(late.approximate() && early.approximate());
        assert_eq!(early.quantiles(), late.quantiles());
    }

    #[test]
    fn negative_values_have_the_same_percentiles_on_both_sides_of_the_limit() {
        // Waits of a skewed clock: all negative, then a mix.
        for shift in [-1_000_000_000i64, -500] {
            let vals: Vec<i64> = (0..EXACT_LIMIT as i64 + 4_000)
                .map(|i| (i * 7919) % 1000 + shift)
                .collect();
            let mut sorted = vals.clone();
            sorted.sort_unstable();
            let mut d = Dist::default();
            for &v in &vals {
                d.add(v);
            }
            assert!(d.approximate());
            let q = d.quantiles().unwrap();
            for (p, got) in [(0.50, q.p50), (0.95, q.p95), (0.99, q.p99)] {
                let want = sorted[rank(p, sorted.len()) - 1];
                let err = (got - want).abs() as f64 / want.abs().max(1) as f64;
                assert!(err <= 0.001, "shift {shift}, p{p}: {got} vs {want}");
            }
            assert_eq!(q.max, sorted[sorted.len() - 1]);
        }
    }

    #[test]
    fn empty_is_none() {
        assert!(Dist::default().quantiles().is_none());
    }

    #[test]
    fn histogram_is_within_a_tenth_of_a_percent() {
        let n = 3 * EXACT_LIMIT as i64;
        let mut d = Dist::default();
        // A spread of magnitudes, shuffled deterministically.
        let vals: Vec<i64> = (0..n).map(|i| ((i * 7919) % n + 1) * 1_234_567).collect();
        for &v in &vals {
            d.add(v);
        }
        assert!(d.approximate());
        let q = d.quantiles().unwrap();
        let mut sorted = vals.clone();
        sorted.sort_unstable();
        for (p, got) in [(0.50, q.p50), (0.95, q.p95), (0.99, q.p99)] {
            let want = sorted[rank(p, sorted.len()) - 1];
            let err = (got - want).abs() as f64 / want as f64;
            assert!(err <= 0.001, "p{p}: {got} vs {want} ({err})");
        }
        assert_eq!(q.max, *sorted.last().unwrap());
        let mean = vals.iter().map(|&v| i128::from(v)).sum::<i128>() as f64 / n as f64;
        assert!((q.mean - mean).abs() / mean < 1e-12);
    }
}
