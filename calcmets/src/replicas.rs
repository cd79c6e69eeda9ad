//! Replicas of one replay (`runworkload --replicas N`): the same jobs run
//! N times, emulated (the host's timing differs each time) or in a twin
//! perturbed by measured delays. Under policies that suspend, a
//! millisecond changes who is suspended, and one run says little; N runs
//! give each figure as their mean with its 95 % confidence interval
//! (Student's t with N − 1 degrees of freedom), and two sets of runs
//! agree on a figure when their intervals overlap.

use serde_json::{Map, Value};

/// A figure over replicas: its mean, and the half-width of its 95 %
/// interval (0 for a single run).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub half: f64,
    pub n: usize,
}

impl Estimate {
    /// Of `values` (one per replica).
    pub fn of(values: &[f64]) -> Option<Estimate> {
        let n = values.len();
        if n == 0 {
            return None;
        }
        let mean = values.iter().sum::<f64>() / n as f64;
        let half = if n < 2 {
            0.0
        } else {
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            t975(n - 1) * (var / n as f64).sqrt()
        };
        Some(Estimate { mean, half, n })
    }

    pub fn low(&self) -> f64 {
        self.mean - self.half
    }

    pub fn high(&self) -> f64 {
        self.mean + self.half
    }

    /// Whether the two sets of runs agree on the figure within what their
    /// replicas spread: their intervals overlap. A single run has no
    /// interval: it agrees when it lies where 95 % of the other side's
    /// next replicas would (its prediction interval, mean ± t·s·√(1 +
    /// 1/n)); two single runs cannot tell (`None`).
    pub fn agrees(&self, other: &Estimate) -> Option<bool> {
        match (self.n, other.n) {
            (1, 1) => None,
            (1, n) => Some((self.mean - other.mean).abs() <= other.half * ((n + 1) as f64).sqrt()),
            (_, 1) => other.agrees(self),
            _ => Some(self.low() <= other.high() && other.low() <= self.high()),
        }
    }
}

/// The 0.975 quantile of Student's t with `df` degrees of freedom.
pub fn t975(df: usize) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    match df {
        0 => f64::NAN,
        1..=30 => TABLE[df - 1],
        // Past 30, the normal's 1.96 plus the first term of the expansion.
        _ => 1.960 + 2.4 / df as f64,
    }
}

/// Leaf by leaf over JSON objects of one shape (each replica's summary):
/// numbers become their mean (in `means`) and their interval's half-width
/// (in `halves`); anything else is kept as the first has it.
pub fn combine(values: &[Value]) -> (Value, Value) {
    match values.first() {
        Some(Value::Object(first)) => {
            let (mut means, mut halves) = (Map::new(), Map::new());
            for key in first.keys() {
                let column: Vec<Value> = values
                    .iter()
                    .map(|v| v.get(key).cloned().unwrap_or(Value::Null))
                    .collect();
                let (m, h) = combine(&column);
                means.insert(key.clone(), m);
                halves.insert(key.clone(), h);
            }
            (Value::Object(means), Value::Object(halves))
        }
        Some(Value::Number(_)) => {
            let nums: Option<Vec<f64>> = values.iter().map(Value::as_f64).collect();
            match nums.and_then(|n| Estimate::of(&n)) {
                Some(e) => (json_number(e.mean), json_number(e.half)),
                None => (Value::Null, Value::Null),
            }
        }
        Some(Value::Array(first)) => {
            let columns: Vec<(Value, Value)> = (0..first.len())
                .map(|i| {
                    let column: Vec<Value> = values
                        .iter()
                        .map(|v| v.get(i).cloned().unwrap_or(Value::Null))
                        .collect();
                    combine(&column)
                })
                .collect();
            (
                Value::Array(columns.iter().map(|c| c.0.clone()).collect()),
                Value::Array(columns.iter().map(|c| c.1.clone()).collect()),
            )
        }
        Some(other) => (other.clone(), Value::Null),
        None => (Value::Null, Value::Null),
    }
}

fn json_number(v: f64) -> Value {
    serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_is_students_and_intervals_that_overlap_agree() {
        let e = Estimate::of(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(e.mean, 12.0);
        // s = 2, t(2) = 4.303: 4.303 · 2 / √3.
        assert!((e.half - 4.303 * 2.0 / 3f64.sqrt()).abs() < 1e-9);
        let one = Estimate::of(&[5.0]).unwrap();
        assert_eq!((one.mean, one.half), (5.0, 0.0));
        assert_eq!(e.agrees(&Estimate::of(&[16.0, 17.0]).unwrap()), Some(true));
        // One run against replicas: within their prediction interval
        // (mean 12 ± 4.303·2·√(1 + 1/3) = ± 9.94), not their mean's.
        assert_eq!(one.agrees(&e), Some(true));
        assert_eq!(Estimate::of(&[22.5]).unwrap().agrees(&e), Some(false));
        assert_eq!(one.agrees(&one), None);
        assert_eq!(
            Estimate::of(&[1.0, 1.1, 0.9])
                .unwrap()
                .agrees(&Estimate::of(&[2.0, 2.1, 1.9]).unwrap()),
            Some(false)
        );
        assert!((t975(100) - 1.984).abs() < 0.01);
    }

    #[test]
    fn summaries_combine_leaf_by_leaf() {
        let a =
            serde_json::json!({"clock": "trace", "jobs": 10, "wait": {"mean": 1.0}, "w": [0, 4]});
        let b =
            serde_json::json!({"clock": "trace", "jobs": 12, "wait": {"mean": 3.0}, "w": [2, 4]});
        let (m, h) = combine(&[a, b]);
        assert_eq!(
            m,
            serde_json::json!({"clock": "trace", "jobs": 11.0, "wait": {"mean": 2.0}, "w": [1.0, 4.0]})
        );
        assert_eq!(h["clock"], Value::Null);
        assert!((h["jobs"].as_f64().unwrap() - 12.706).abs() < 1e-9);
    }
}
