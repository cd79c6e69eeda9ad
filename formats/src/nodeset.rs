//! Nodeset notation, with ClusterShell's semantics: `vn[0000-3599]`,
//! `a[2-8/2]`, `da[1-3]c[1-2]`, and the operators `,` (union), `!`
//! (difference), `&` (intersection) and `^` (symmetric difference), read
//! left to right, with parentheses.
//!
//! The parsing, set algebra and folding are the `nodeset` crate's, which
//! follows ClusterShell and agrees with its `nodeset` tool on every case
//! `scripts/nodeset-vs-clustershell.sh` tries. This module fills the one gap
//! clemu needs: `@group` names defined in clemu's own configuration rather
//! than in ClusterShell's configuration files. A group reference is
//! replaced by its definition in parentheses before parsing.
//!
//! It also covers what the crate gets wrong or slow, each checked against
//! ClusterShell by `scripts/nodeset-vs-clustershell.sh`: an operator with
//! nothing after it (`a!`) is an error, not ignored; parentheses nested
//! deeper than [`MAX_DEPTH`] are refused before the crate's recursive
//! parser overflows the stack; the terms of a long union are put in order
//! first, because the crate re-sorts its whole list whenever a name
//! arrives out of order (quadratic on a shuffled list); and names that are
//! only digits fold as ClusterShell folds them (`[1-3]`, not `1,2,3`).

use std::collections::BTreeMap;
use std::fmt;

/// A set of node names.
pub type NodeSet = nodeset::NodeSet;

/// Named nodesets (`@name`), as the configuration defines them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Groups {
    defs: BTreeMap<String, String>,
}

/// Why an expression is not a nodeset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodesetError {
    UnknownGroup(String),
    /// A group defined (directly or not) in terms of itself.
    GroupCycle(String),
    Syntax {
        expr: String,
        detail: String,
    },
}

impl fmt::Display for NodesetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodesetError::UnknownGroup(g) => write!(f, "unknown group @{g}"),
            NodesetError::GroupCycle(g) => write!(f, "group @{g} is defined in terms of itself"),
            NodesetError::Syntax { expr, detail } => {
                // A list of 100,000 names is a valid input: quote its start.
                let shown = match expr.char_indices().nth(SHOWN) {
                    Some((cut, _)) => format!("{:?}…", &expr[..cut]),
                    None => format!("{expr:?}"),
                };
                write!(f, "not a nodeset: {shown}: {detail}")
            }
        }
    }
}

impl std::error::Error for NodesetError {}

/// Longest expression (a plain list of 100,000 names of up to 150 bytes
/// fits).
const MAX_INPUT: usize = 16 << 20;

/// Most bytes that replacing groups may add: group definitions that refer
/// to others several times each grow exponentially.
const MAX_GROWTH: usize = 1 << 20;

/// Deepest nesting of parentheses (groups included): the parser
/// underneath recurses once a level.
pub const MAX_DEPTH: usize = 100;

/// Characters of an expression quoted in an error.
const SHOWN: usize = 80;

/// Terms of a union past which they are put in order before parsing.
const SORT_UNION_PAST: usize = 32;

/// The operators, outside brackets.
fn is_operator(c: u8) -> bool {
    matches!(c, b',' | b'!' | b'&' | b'^')
}

/// Refuses an operator with no operand on one side (`a!`, `(a,)`, `,a`),
/// as ClusterShell does, and nesting deeper than [`MAX_DEPTH`].
fn check_structure(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut brackets = 0usize;
    let mut parens = 0usize;
    // Whether what came before (spaces aside) can end an operand.
    let mut after_operand = false;
    for (i, &b) in bytes.iter().enumerate() {
        if brackets > 0 {
            match b {
                b'[' => brackets += 1,
                b']' => brackets -= 1,
                _ => {}
            }
            continue;
        }
        match b {
            b' ' => continue,
            b'[' => brackets += 1,
            b'(' => {
                parens += 1;
                if parens > MAX_DEPTH {
                    return Err(format!(
                        "parentheses nested more than {MAX_DEPTH} deep, at byte {}",
                        i + 1
                    ));
                }
                after_operand = false;
                continue;
            }
            b')' if !after_operand => {
                return Err(format!(
                    "empty parentheses or a missing operand at byte {}",
                    i + 1
                ));
            }
            b')' => parens = parens.saturating_sub(1),
            op if is_operator(op) => {
                let next = bytes[i + 1..].iter().find(|&&c| c != b' ');
                if !after_operand
                    || matches!(next, None | Some(b')'))
                    || next.is_some_and(|&c| is_operator(c))
                {
                    return Err(format!(
                        "missing nodeset operand with '{}' operator, at byte {}",
                        op as char,
                        i + 1
                    ));
                }
                after_operand = false;
                continue;
            }
            _ => {}
        }
        after_operand = true;
    }
    Ok(())
}

/// The terms of a union of many (commas only, outside brackets and
/// parentheses), ordered by their first name's letters and numbers; `None`
/// for anything else. A union does not depend on the order of its terms.
fn union_in_order(text: &str) -> Option<String> {
    let mut terms = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, b) in text.bytes().enumerate() {
        match b {
            b'[' | b'(' => depth += 1,
            b']' | b')' => depth = depth.saturating_sub(1),
            b',' if depth == 0 => {
                terms.push(&text[start..i]);
                start = i + 1;
            }
            b'!' | b'&' | b'^' if depth == 0 => return None,
            _ => {}
        }
    }
    terms.push(&text[start..]);
    if terms.len() <= SORT_UNION_PAST {
        return None;
    }
    terms.sort_by_cached_key(|t| natural_key(t));
    Some(terms.join(","))
}

/// Node names in natural order, as [`natural_key`] orders them (numbers by
/// value, then by width), without building keys.
fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        if a[i].is_ascii_digit() && b[j].is_ascii_digit() {
            let run = |s: &[u8], from: usize| {
                from + s[from..].iter().take_while(|c| c.is_ascii_digit()).count()
            };
            let (ie, je) = (run(a, i), run(b, j));
            // By value: without leading zeros, the longer is larger, else
            // the digits decide; equal values, the narrower first.
            let (x, y) = (&a[i..ie], &b[j..je]);
            fn strip(d: &[u8]) -> &[u8] {
                let z = d.iter().take_while(|&&c| c == b'0').count();
                &d[z.min(d.len().saturating_sub(1))..]
            }
            let (sx, sy) = (strip(x), strip(y));
            let by_value = sx.len().cmp(&sy.len()).then_with(|| sx.cmp(sy));
            let order = by_value.then_with(|| x.len().cmp(&y.len()));
            if order != Ordering::Equal {
                return order;
            }
            (i, j) = (ie, je);
        } else {
            if a[i] != b[j] {
                return a[i].cmp(&b[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (a.len() - i).cmp(&(b.len() - j))
}

/// A name's letters and numbers, numbers by value (then by width, so that
/// padded and unpadded names stay apart); a bracket counts as its first
/// number.
fn natural_key(term: &str) -> Vec<(String, u64, usize)> {
    let mut key = Vec::new();
    let mut letters = String::new();
    let bytes = term.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b.is_ascii_digit() || b == b'[' {
            let from = i + usize::from(b == b'[');
            let digits = bytes[from..]
                .iter()
                .take_while(|c| c.is_ascii_digit())
                .count();
            let value = term[from..from + digits].parse().unwrap_or(u64::MAX);
            key.push((std::mem::take(&mut letters), value, digits));
            i = from + digits;
            if b == b'[' {
                i += bytes[i..]
                    .iter()
                    .position(|&c| c == b']')
                    .map_or(bytes.len() - i, |p| p + 1);
            }
        } else {
            letters.push(b as char);
            i += 1;
        }
    }
    key.push((letters, 0, 0));
    key
}

/// Most names an expression may denote. The parser underneath builds its
/// ranges eagerly: a billion names would take gigabytes and most of a
/// minute before any answer.
pub const MAX_NAMES: u128 = 10_000_000;

/// An upper bound of the names `text` can denote: the sum, over its node
/// patterns, of the product of their bracket ranges' sizes. `None` if a
/// bracket does not read as ranges (the parser will say why).
fn names_bound(text: &str) -> Option<u128> {
    let mut total: u128 = 0;
    let mut product: u128 = 1;
    let mut in_name = false;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'[' => {
                let rest = &text[i + 1..];
                let end = rest.find(']')?;
                let mut count: u128 = 0;
                for item in rest[..end].split(',') {
                    let (range, step) = match item.split_once('/') {
                        Some((r, s)) => (r, s.trim().parse::<u128>().ok()?.max(1)),
                        None => (item, 1),
                    };
                    let n = match range.split_once('-') {
                        Some((lo, hi)) => {
                            let lo: u128 = lo.trim().parse().ok()?;
                            let hi: u128 = hi.trim().parse().ok()?;
                            hi.saturating_sub(lo) / step + 1
                        }
                        None => 1,
                    };
                    count = count.saturating_add(n);
                }
                product = product.saturating_mul(count);
                in_name = true;
                i += end + 1;
            }
            b',' | b'!' | b'&' | b'^' | b'(' | b')' | b' ' => {
                if in_name {
                    total = total.saturating_add(product);
                }
                product = 1;
                in_name = false;
            }
            _ => in_name = true,
        }
        i += 1;
    }
    if in_name {
        total = total.saturating_add(product);
    }
    Some(total)
}

/// The words of an expression between its operators, brackets left whole.
fn top_level_words(text: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    text.split(move |c: char| {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        depth == 0 && ",!&^()".contains(c)
    })
}

/// `1-11` or `1-11/2`: digits, a dash, digits. The parser underneath takes
/// such a word for a range of bare numbers, ClusterShell for one name.
fn is_bare_range(tok: &str) -> bool {
    let core = tok.split_once('/').map_or(tok, |(r, _)| r);
    core.split_once('-').is_some_and(|(lo, hi)| {
        !lo.is_empty()
            && !hi.is_empty()
            && lo.bytes().all(|b| b.is_ascii_digit())
            && hi.bytes().all(|b| b.is_ascii_digit())
    })
}

/// Refuses a number in a name longer than 9 digits once a bracket's numbers
/// are joined with the digits around it (`a[1000-9999]999999`): the parser
/// underneath would overflow.
fn check_digits(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let digits_before = |i: usize| {
        bytes[..i]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'[' {
            let Some(len) = text[i + 1..].find(']') else {
                return Ok(());
            };
            let inside = &text[i + 1..i + 1 + len];
            let widest = inside
                .split(|c: char| !c.is_ascii_digit())
                .map(str::len)
                .max()
                .unwrap_or(0);
            let after = bytes[i + len + 2..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count();
            if digits_before(i) + widest + after > 9 {
                return Err(format!(
                    "a number of more than 9 digits in a node name, near byte {}",
                    i + 1
                ));
            }
            i += len + 2;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// Refuses a range step of 0 (`a[1-9/0]`), as ClusterShell does; the
/// parser underneath would divide by it.
fn check_steps(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'[' => depth += 1,
            b']' => depth = depth.saturating_sub(1),
            b'/' if depth == 0 => {
                return Err(format!("'/' outside brackets at byte {}", i + 1));
            }
            b'/' => {
                let digits: &[u8] = &bytes[i + 1..];
                let n = digits.iter().take_while(|d| d.is_ascii_digit()).count();
                if n > 0 && digits[..n].iter().all(|&d| d == b'0') {
                    return Err(format!("a range step of 0 at byte {}", i + 1));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Characters of a group name after `@`.
fn is_group_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+')
}

impl Groups {
    pub fn new() -> Groups {
        Groups::default()
    }

    /// Defines `@name` as `expr` (which may refer to other groups).
    pub fn define(&mut self, name: &str, expr: &str) {
        self.defs.insert(name.to_string(), expr.to_string());
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.defs.keys().map(String::as_str)
    }

    /// `expr` with every `@group` replaced by `(its definition)`.
    fn substitute(&self, expr: &str, depth: usize, limit: usize) -> Result<String, NodesetError> {
        let mut out = String::with_capacity(expr.len());
        let mut rest = expr;
        while let Some(at) = rest.find('@') {
            out.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            let len = after.find(|c| !is_group_char(c)).unwrap_or(after.len());
            let name = &after[..len];
            let def = self
                .defs
                .get(name)
                .ok_or_else(|| NodesetError::UnknownGroup(name.to_string()))?;
            if depth > self.defs.len() {
                return Err(NodesetError::GroupCycle(name.to_string()));
            }
            out.push('(');
            out.push_str(&self.substitute(def, depth + 1, limit)?);
            out.push(')');
            if out.len() > limit {
                return Err(NodesetError::Syntax {
                    expr: expr.to_string(),
                    detail: format!("more than {MAX_GROWTH} bytes longer once groups are replaced"),
                });
            }
            rest = &after[len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Parses a nodeset expression, groups resolved.
    pub fn parse(&self, expr: &str) -> Result<NodeSet, NodesetError> {
        let syntax = |detail: String| NodesetError::Syntax {
            expr: expr.to_string(),
            detail,
        };
        if expr.len() > MAX_INPUT {
            return Err(syntax(format!("longer than {MAX_INPUT} bytes")));
        }
        let text = self.substitute(expr, 0, expr.len() + MAX_GROWTH)?;
        if let Some(c) = text
            .chars()
            .find(|&c| !(c.is_ascii_alphanumeric() || "-_.:+[]/,!&^()".contains(c)))
        {
            return Err(syntax(format!(
                "{c:?} is not allowed (node names are ASCII letters, digits and - _ . : +)"
            )));
        }
        check_structure(&text).map_err(syntax)?;
        check_steps(&text).map_err(syntax)?;
        check_digits(&text).map_err(syntax)?;
        if let Some(tok) = top_level_words(&text).find(|t| is_bare_range(t)) {
            return Err(syntax(format!(
                "{tok:?} reads as a range of numbers, not a node name (ClusterShell would take it \
                 for one name): give node names a letter first, or write prefix[{tok}]"
            )));
        }
        if let Some(n) = names_bound(&text).filter(|&n| n > MAX_NAMES) {
            return Err(syntax(format!(
                "up to {n} names, more than the {MAX_NAMES} a nodeset may hold"
            )));
        }
        let ordered = union_in_order(&text);
        ordered
            .as_deref()
            .unwrap_or(&text)
            .parse::<NodeSet>()
            .map_err(|e| syntax(e.to_string()))
    }
}

/// Parses a nodeset expression that uses no groups.
pub fn parse(expr: &str) -> Result<NodeSet, NodesetError> {
    Groups::default().parse(expr)
}

/// The folded (most compact) form of a list of node names, such as the
/// nodes of a job. Building the set from one joined string of names in
/// order is linear; unions one name at a time, or out of order, are not.
pub fn fold<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut names: Vec<&str> = names.into_iter().collect();
    // One name (most jobs run on one node) is its own folded form.
    if let [one] = names[..] {
        let mut out = String::with_capacity(one.len() + 2);
        push_name(&mut out, one);
        return out;
    }
    // A job's nodes come in order already: only a list out of order is
    // sorted (with a comparison that allocates nothing).
    if !names.is_sorted_by(|a, b| natural_cmp(a, b).is_le()) {
        names.sort_by(|a, b| natural_cmp(a, b));
    }
    let mut joined = String::new();
    for n in names {
        if !joined.is_empty() {
            joined.push(',');
        }
        push_name(&mut joined, n);
    }
    match joined.parse::<NodeSet>() {
        Ok(set) => folded(&set),
        // Node names come from parsed nodesets, so this cannot happen; the
        // unfolded list is still a correct answer.
        Err(_) => joined,
    }
}

/// Most names [`folded`] checks its answer for, and fixes up names of
/// digits only in.
const FOLD_CHECKED: usize = 1_000_000;

/// The folded form of a set, as ClusterShell's `nodeset -f` prints it. The
/// crate folds names that differ only in zero padding (`0da`, `0001da`)
/// into a range (`[0-0001]da`) that does not parse back; such a set is
/// printed as the list of its names instead (ClusterShell: `[0,0001]da`),
/// longer but right.
pub fn folded(set: &NodeSet) -> String {
    // Past a million names, the crate's own text, as it is: the checks
    // below list every name, seconds of work (a fuzzer find).
    if set.len() > FOLD_CHECKED {
        return set.to_string();
    }
    let digits_only = |n: &str| n.bytes().all(|b| b.is_ascii_digit());
    if set.iter().any(|n| digits_only(&n)) {
        return fold_with_numbers(set);
    }
    let text = set.to_string();
    if parse(&text).is_ok_and(|again| count(&again) == count(set)) {
        return text;
    }
    let mut out = String::new();
    for n in set.iter() {
        if !out.is_empty() {
            out.push(',');
        }
        push_name(&mut out, &n);
    }
    out
}

/// [`folded`] for a set with names that are only digits, which the crate
/// lists one by one (and which make it list the others unfolded too):
/// ClusterShell folds them as a bracket with nothing before it, `[1-3]`,
/// first. They are folded behind a letter, which is then taken off.
fn fold_with_numbers(set: &NodeSet) -> String {
    let (numbers, others): (Vec<String>, Vec<String>) = set
        .iter()
        .partition(|n| n.bytes().all(|b| b.is_ascii_digit()));
    let behind: Vec<String> = numbers.iter().map(|n| format!("x{n}")).collect();
    // The letter off every term (the fold may list several: `x[1-3],x01`).
    let numbers: Vec<String> = fold(behind.iter().map(String::as_str))
        .split(',')
        .map(|term| term.strip_prefix('x').unwrap_or(term).to_string())
        .collect();
    let numbers = numbers.join(",");
    // One number folds to itself, without brackets, as in ClusterShell.
    if others.is_empty() {
        return numbers;
    }
    format!("{numbers},{}", fold(others.iter().map(String::as_str)))
}

/// Appends a node name as an expression: `1-11`, which would read as a
/// range of numbers, is written `1-[11]`.
fn push_name(out: &mut String, name: &str) {
    match name.split_once('-') {
        Some((lo, hi)) if is_bare_range(name) => {
            out.push_str(lo);
            out.push_str("-[");
            out.push_str(hi);
            out.push(']');
        }
        _ => out.push_str(name),
    }
}

/// How many distinct names the set holds. The crate's own count (and its
/// listing) can repeat names when ranges overlap with different zero
/// padding (sets of names that begin with digits, a fuzzer find); up to a
/// million names they are counted one by one.
pub fn count(set: &NodeSet) -> usize {
    let claimed = set.len();
    if claimed <= 1_000_000 {
        set.iter().collect::<std::collections::HashSet<_>>().len()
    } else {
        claimed
    }
}

/// Counts per node as Slurm writes them in `SLURM_JOB_CPUS_PER_NODE` and
/// `SLURM_TASKS_PER_NODE`: runs of one count folded, `4(x2),2`.
pub fn fold_counts(counts: impl IntoIterator<Item = u32>) -> String {
    let mut runs: Vec<(u32, usize)> = Vec::new();
    for c in counts {
        match runs.last_mut() {
            Some((last, n)) if *last == c => *n += 1,
            _ => runs.push((c, 1)),
        }
    }
    let runs: Vec<String> = runs
        .into_iter()
        .map(|(c, n)| {
            if n > 1 {
                format!("{c}(x{n})")
            } else {
                c.to_string()
            }
        })
        .collect();
    runs.join(",")
}

/// The counts [`fold_counts`] folded, one per node (`4(x2),2`: 4, 4, 2);
/// `None` for a text that is not such a list, or one of more than
/// `most` counts.
pub fn unfold_counts(text: &str, most: usize) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for item in text.split(',') {
        let (count, times) = match item.split_once("(x") {
            Some((c, t)) => (c, t.strip_suffix(')')?.parse::<usize>().ok()?),
            None => (item, 1),
        };
        let count: u32 = count.parse().ok()?;
        if times == 0 || times > most.saturating_sub(out.len()) {
            return None;
        }
        out.extend(std::iter::repeat_n(count, times));
    }
    Some(out)
}

/// Every name in the set, in the set's order.
pub fn expand(set: &NodeSet) -> Vec<String> {
    // The crate may list a name twice (see `count`).
    let mut seen = std::collections::HashSet::new();
    set.iter().filter(|n| seen.insert(n.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_node_fold_and_unfold_as_slurm_writes_them() {
        assert_eq!(fold_counts([2, 2]), "2(x2)");
        assert_eq!(fold_counts([4, 4, 3, 2, 2]), "4(x2),3,2(x2)");
        assert_eq!(fold_counts([1]), "1");
        assert_eq!(
            unfold_counts("4(x2),3,2(x2)", 10),
            Some(vec![4, 4, 3, 2, 2])
        );
        assert_eq!(unfold_counts("1", 10), Some(vec![1]));
        for bad in ["", "3(x", "3(x0)", "a", "2,", "4(x2)x"] {
            assert_eq!(unfold_counts(bad, 10), None, "{bad}");
        }
        // No more than asked for, however large a count says.
        assert_eq!(unfold_counts("1(x4000000000)", 10), None);
        assert_eq!(unfold_counts("1,1(x18446744073709551615)", 10), None);
    }

    #[test]
    fn clustershell_forms() {
        for (expr, folded, count) in [
            ("vn[0000-3599]", "vn[0000-3599]", 3600),
            ("a[2-8/2]", "a[2,4,6,8]", 4),
            ("da[1-3]c[1-2]", "da[1-3]c[1-2]", 6),
            ("vn[1-10]!vn[3-4]", "vn[1-2,5-10]", 8),
            ("vn[1-10]&vn[5-20]", "vn[5-10]", 6),
            ("vn[1-10]^vn[5-20]", "vn[1-4,11-20]", 14),
            ("vn[1-4],vn[6-7]&vn[2-6]", "vn[2-4,6]", 4),
            ("a1b1,a1b2,a2b1,a2b2", "a[1-2]b[1-2]", 4),
        ] {
            let s = parse(expr).unwrap();
            assert_eq!(s.to_string(), folded, "{expr}");
            assert_eq!(s.len(), count, "{expr}");
        }
    }

    #[test]
    fn groups_from_the_configuration() {
        let mut g = Groups::new();
        g.define("rack1", "vn[00-09]");
        g.define("rack2", "vn[10-19]");
        g.define("all", "@rack1,@rack2");
        assert_eq!(g.parse("@all!vn05").unwrap().to_string(), "vn[00-04,06-19]");
        assert_eq!(
            g.parse("@rack1&vn[08-12]").unwrap().to_string(),
            "vn[08-09]"
        );
        assert_eq!(
            g.parse("@nope"),
            Err(NodesetError::UnknownGroup("nope".into()))
        );
        g.define("loop", "@loop,x1");
        assert!(matches!(g.parse("@loop"), Err(NodesetError::GroupCycle(_))));
        // Each level doubles: 2^40 copies once replaced.
        let mut g = Groups::new();
        g.define("g0", "x1");
        for k in 1..=40 {
            g.define(&format!("g{k}"), &format!("@g{},@g{}", k - 1, k - 1));
        }
        assert!(matches!(g.parse("@g40"), Err(NodesetError::Syntax { .. })));
    }

    #[test]
    fn huge_sets_are_refused_before_they_are_built() {
        let t = std::time::Instant::now();
        for e in [
            "a[0-999999999]",
            "a[0-99999]b[0-99999]",
            "x,a[0-5000000],b[0-5000000]",
        ] {
            let err = parse(e).unwrap_err().to_string();
            assert!(err.contains("more than the 10000000"), "{e}: {err}");
        }
        assert!(t.elapsed() < std::time::Duration::from_secs(1));
        assert_eq!(parse("a[0-9999]b[0-99]").unwrap().len(), 1_000_000);
        assert_eq!(parse("a[0-99/2],b1").unwrap().len(), 51);
    }

    #[test]
    fn fold_names() {
        assert_eq!(fold(["vn3", "vn1", "vn2", "vn7"]), "vn[1-3,7]");
        assert_eq!(fold([]), "");
        // Mixed zero padding (a fuzzer find): still a set that parses back.
        let f = fold(["0001da", "0da"]);
        assert_eq!(parse(&f).unwrap().len(), 2, "{f}");
        // Names that read as number ranges are written so they do not.
        for names in [vec!["1-11", "1-12"], vec!["1-1", "5"]] {
            let f = fold(names.iter().copied());
            assert_eq!(parse(&f).unwrap().len(), names.len(), "{f}");
        }
    }

    #[test]
    fn an_operator_needs_an_operand_on_both_sides() {
        for e in [
            "a[1-3]!", "a!", "!a", "a,,b", "a,", ",a", "a&", "(a^)", "a!(,b)", "()",
        ] {
            let err = parse(e).unwrap_err().to_string();
            assert!(
                err.contains("operand") || err.contains("empty"),
                "{e}: {err}"
            );
        }
        assert_eq!(parse("a[1-3]!a2").unwrap().to_string(), "a[1,3]");
    }

    #[test]
    fn deep_parentheses_are_refused_not_a_stack_overflow() {
        let deep = format!("{}a{}", "(".repeat(20_000), ")".repeat(20_000));
        let err = parse(&deep).unwrap_err().to_string();
        assert!(err.contains("nested more than 100"), "{err}");
        assert!(err.len() < 300, "the error quotes the start only: {err}");
        let ok = format!("{}a{}", "(".repeat(MAX_DEPTH), ")".repeat(MAX_DEPTH));
        assert_eq!(parse(&ok).unwrap().to_string(), "a");
    }

    #[test]
    fn names_of_digits_fold_as_clustershell_folds_them() {
        for (expr, want) in [
            ("[1-3]", "[1-3]"),
            ("1,2,3", "[1-3]"),
            ("[1-3],5", "[1-3,5]"),
            ("a[1-3],[4-5]", "[4-5],a[1-3]"),
            ("x[1-2],1", "1,x[1-2]"),
            ("5", "5"),
        ] {
            assert_eq!(folded(&parse(expr).unwrap()), want, "{expr}");
        }
        // Mixed padding, which the crate folds into a range that does not
        // parse back: still the right names.
        for expr in ["0,0001", "01,1,2", "[1-3],01,x5"] {
            let set = parse(expr).unwrap();
            let again = parse(&folded(&set)).unwrap();
            let (mut a, mut b) = (expand(&again), expand(&set));
            a.sort();
            b.sort();
            assert_eq!(a, b, "{expr}: {}", folded(&set));
        }
    }

    #[test]
    fn natural_order_compares_numbers_by_value() {
        use std::cmp::Ordering::*;
        for (a, b, want) in [
            ("vn2", "vn10", Less),
            ("vn10", "vn10", Equal),
            ("vn010", "vn10", Greater),
            ("a1b2", "a1b10", Less),
            ("a", "a1", Less),
            ("rc0063", "rc0100", Less),
            ("x9", "y1", Less),
        ] {
            assert_eq!(natural_cmp(a, b), want, "{a} {b}");
            assert_eq!(natural_cmp(b, a), want.reverse(), "{b} {a}");
        }
    }

    #[test]
    fn a_long_union_in_any_order_is_the_same_set() {
        // Shuffled (deterministically): the crate alone re-sorts at every
        // name out of order.
        let n = 20_000u64;
        let names: Vec<String> = (0..n).map(|i| format!("vn{:05}", (i * 7919) % n)).collect();
        let set = parse(&names.join(",")).unwrap();
        assert_eq!(folded(&set), "vn[00000-19999]");
        assert_eq!(count(&set), n as usize);
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(fold(refs), "vn[00000-19999]");
        // Only a plain union is reordered: a difference is read left to
        // right as written.
        let terms: Vec<String> = (0..40).map(|i| format!("b{i}")).collect();
        let expr = format!("{}!b1", terms.join(","));
        assert_eq!(parse(&expr).unwrap().len(), 39);
    }

    #[test]
    fn bad_expressions_are_errors() {
        for e in [
            "vn[1-3",
            "vn[3-1]",
            "vn[a-b]",
            "vn[1-1/0]^yn",
            "a[1-9/00]",
            "vCn1\u{26a}^001\t0^",
            "a b",
            "1-3,a",
            "vn[1010-3595999]3599",
            "P^1-[1]/",
        ] {
            assert!(matches!(parse(e), Err(NodesetError::Syntax { .. })), "{e}");
        }
    }
}
