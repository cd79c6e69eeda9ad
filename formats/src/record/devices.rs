//! The devices of generic resources a record names, and their text form.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};

/// Devices of one kind that a job held on one node: GPUs 0 and 1 of
/// `vn01` are `vn01:gpu=0,1`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Devices<'a> {
    #[serde(borrow)]
    pub node: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: Cow<'a, str>,
    /// Device numbers on that node, ascending.
    pub ids: Vec<u32>,
}

impl Devices<'_> {
    pub fn into_owned(self) -> Devices<'static> {
        Devices {
            node: Cow::Owned(self.node.into_owned()),
            kind: Cow::Owned(self.kind.into_owned()),
            ids: self.ids,
        }
    }

    /// `NODE:KIND=ID,ID;NODE:KIND=ID…`, as sigsleep's `--devices` takes
    /// them and `calcmets dump` shows them.
    pub fn list_to_string(list: &[Devices<'_>]) -> String {
        list.iter()
            .map(|d| {
                let ids: Vec<String> = d.ids.iter().map(u32::to_string).collect();
                format!("{}:{}={}", d.node, d.kind, ids.join(","))
            })
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Reads [`Devices::list_to_string`]'s form back.
    pub fn parse_list(text: &str) -> Result<Vec<Devices<'static>>, String> {
        let mut out = Vec::new();
        for entry in text.split(';').filter(|e| !e.is_empty()) {
            let bad = || format!("{entry:?} is not NODE:KIND=ID[,ID...]");
            let (node, rest) = entry.split_once(':').ok_or_else(bad)?;
            let (kind, ids) = rest.split_once('=').ok_or_else(bad)?;
            if node.is_empty() || kind.is_empty() {
                return Err(bad());
            }
            let ids = ids
                .split(',')
                .map(|i| i.parse::<u32>().map_err(|_| bad()))
                .collect::<Result<Vec<u32>, String>>()?;
            out.push(Devices {
                node: Cow::Owned(node.to_string()),
                kind: Cow::Owned(kind.to_string()),
                ids,
            });
        }
        Ok(out)
    }
}
