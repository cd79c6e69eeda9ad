//! A results directory's `jobs.csv`, as runworkload writes it: for each job
//! of the cluster, the trace job it replays and the nodes it ran on.

use std::collections::HashMap;
use std::path::Path;

use anyhow::{bail, Context, Result};

/// The file's name in a results directory.
pub const FILE: &str = "jobs.csv";

/// What jobs.csv says of one of the cluster's jobs.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The trace's job number (SWF field 1; -1 where the trace has none).
    pub trace_id: i64,
    /// All its nodes, folded; `None` in files without the column.
    pub nodes: Option<String>,
    /// The submit instant its records carry (Unix ns); `None` in files
    /// without the column.
    pub submit_ns: Option<i64>,
}

/// The rows of `dir`'s jobs.csv by the cluster's job id; empty when there
/// is none. Jobs never submitted (job id 0) are left out.
pub fn read(dir: &Path) -> Result<HashMap<u64, Row>> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split(',').collect();
    let col = |name: &str| header.iter().position(|&h| h == name);
    let submit_col = col("submit_ns");
    let (Some(trace_col), Some(id_col)) = (col("trace_id"), col("job_id")) else {
        bail!("{}: no trace_id and job_id columns", path.display());
    };
    // The nodes are the last column, quoted: they hold commas.
    let with_nodes = header.last() == Some(&"nodes");
    let mut out = HashMap::new();
    for (n, line) in lines.enumerate() {
        let (rest, nodes) = match line.rsplit_once(",\"") {
            Some((rest, quoted)) if with_nodes => (rest, quoted.strip_suffix('"')),
            _ => (line, None),
        };
        let fields: Vec<&str> = rest.split(',').collect();
        let trace_id = fields.get(trace_col).and_then(|f| f.parse::<i64>().ok());
        let id = fields.get(id_col).and_then(|f| f.parse::<u64>().ok());
        let submit_ns = match submit_col {
            None => Some(None),
            Some(c) => fields.get(c).and_then(|f| f.parse::<i64>().ok()).map(Some),
        };
        let (Some(trace_id), Some(id), Some(submit_ns)) = (trace_id, id, submit_ns) else {
            bail!("{}:{}: malformed line", path.display(), n + 2);
        };
        if id != 0 {
            let nodes = nodes.filter(|s| !s.is_empty()).map(str::to_string);
            out.insert(
                id,
                Row {
                    trace_id,
                    nodes,
                    submit_ns,
                },
            );
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_with_and_without_nodes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join(FILE),
            "trace_id,job_id,cores,submit_ns,state,nodes\n\
             4515,1,2,1700000000123456789,completed,\"vn[001-002],vn007\"\n\
             4516,0,2,0,not_submitted,\"\"\n\
             -1,2,2,1700000001000000000,completed,\"\"\n",
        )
        .unwrap();
        let rows = read(dir.path()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[&1].trace_id, 4515);
        assert_eq!(rows[&1].nodes.as_deref(), Some("vn[001-002],vn007"));
        assert_eq!(rows[&1].submit_ns, Some(1_700_000_000_123_456_789));
        assert_eq!((rows[&2].trace_id, rows[&2].nodes.as_deref()), (-1, None));
        // Files from before the column was there still read.
        std::fs::write(
            dir.path().join(FILE),
            "trace_id,job_id,state\n7,3,completed\n",
        )
        .unwrap();
        assert_eq!(read(dir.path()).unwrap()[&3].submit_ns, None);
        std::fs::write(dir.path().join(FILE), "trace_id,job_id\n1,x\n").unwrap();
        let err = read(dir.path()).unwrap_err().to_string();
        assert!(err.ends_with("jobs.csv:2: malformed line"), "{err}");
    }
}
