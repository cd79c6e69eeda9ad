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
                write!(f, "not a nodeset: {expr:?}: {detail}")
            }
        }
    }
}

impl std::error::Error for NodesetError {}

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
    fn substitute(&self, expr: &str, depth: usize) -> Result<String, NodesetError> {
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
            out.push_str(&self.substitute(def, depth + 1)?);
            out.push(')');
            rest = &after[len..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Parses a nodeset expression, groups resolved.
    pub fn parse(&self, expr: &str) -> Result<NodeSet, NodesetError> {
        let text = self.substitute(expr, 0)?;
        text.parse::<NodeSet>().map_err(|e| NodesetError::Syntax {
            expr: expr.to_string(),
            detail: e.to_string(),
        })
    }
}

/// Parses a nodeset expression that uses no groups.
pub fn parse(expr: &str) -> Result<NodeSet, NodesetError> {
    Groups::default().parse(expr)
}

/// The folded (most compact) form of a list of node names, such as the
/// nodes of a job. Building the set from one joined string is linear;
/// unions one name at a time are not.
pub fn fold<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    let mut joined = String::new();
    for n in names {
        if !joined.is_empty() {
            joined.push(',');
        }
        joined.push_str(n);
    }
    match joined.parse::<NodeSet>() {
        Ok(set) => set.to_string(),
        // Node names come from parsed nodesets, so this cannot happen; the
        // unfolded list is still a correct answer.
        Err(_) => joined,
    }
}

/// Every name in the set, in the set's order.
pub fn expand(set: &NodeSet) -> Vec<String> {
    set.iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn fold_names() {
        assert_eq!(fold(["vn3", "vn1", "vn2", "vn7"]), "vn[1-3,7]");
        assert_eq!(fold([]), "");
    }

    #[test]
    fn bad_expressions_are_errors() {
        for e in ["vn[1-3", "vn[3-1]", "vn[a-b]"] {
            assert!(matches!(parse(e), Err(NodesetError::Syntax { .. })), "{e}");
        }
    }
}
