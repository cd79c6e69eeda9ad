//! What a config says of deploying agents (`[agents]`), checked as the
//! config is read: this module stands below the config, which assembles
//! it, and below the deploying built on both.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

/// What `[agents]` says of deploying agents.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The agents' directory on their hosts.
    pub dir: String,
    /// Extra options for ssh and scp (`-i KEY -p PORT`).
    pub ssh_options: Vec<String>,
    /// The address (or comma-separated list) agents reach the
    /// controller at.
    pub controller_address: String,
    /// Hosts worked on at once.
    pub fanout: usize,
    /// Through ClusterShell's `clush`, when it is installed.
    pub clush: bool,
}

impl Settings {
    /// From the config's `[agents]` keys; `controllers` and `listen` are
    /// the controller's, the address's default.
    pub fn new(
        dir: Option<String>,
        ssh_options: Option<&str>,
        controller_address: Option<String>,
        fanout: Option<usize>,
        clush: Option<bool>,
        controllers: &[String],
        listen: &str,
    ) -> Result<Settings, String> {
        let ssh_options = match ssh_options {
            None => Vec::new(),
            Some(s) => shlex::split(s)
                .ok_or_else(|| format!("agents.ssh_options: unbalanced quotes in {s:?}"))?,
        };
        let dir = dir.unwrap_or_else(|| "clemu-agent".into());
        if dir.trim_end_matches('/').is_empty() || dir.split('/').any(|p| p == "..") {
            return Err(format!(
                "agents.deploy_dir = {dir:?}: give a directory of its own for the agents"
            ));
        }
        // The scripts quote it, scp and clush take it as it is: only
        // characters both read the same.
        if dir.starts_with('~') {
            return Err(format!(
                "agents.deploy_dir = {dir:?}: a relative path is already under the ssh user's \
                 home; write it without ~/"
            ));
        }
        if !dir
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./+@%,".contains(&b))
        {
            return Err(format!(
                "agents.deploy_dir = {dir:?}: letters, digits and - _ . / + @ % , only"
            ));
        }
        if let Some(list) = &controller_address {
            // As agents read the list: entries trimmed, empty ones skipped.
            for a in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
                let port = a.rsplit_once(':').map(|(h, p)| (h, p.parse::<u16>()));
                if !matches!(port, Some((h, Ok(p))) if !h.is_empty() && p > 0) {
                    return Err(format!(
                        "agents.controller_address: {a:?} is not HOST:PORT (a list: \
                         HOST:PORT,HOST:PORT)"
                    ));
                }
            }
        }
        Ok(Settings {
            dir,
            ssh_options,
            controller_address: controller_address.unwrap_or_else(|| {
                if controllers.is_empty() {
                    listen.to_string()
                } else {
                    controllers.join(",")
                }
            }),
            fanout: fanout.unwrap_or(32).max(1),
            clush: clush.unwrap_or(false),
        })
    }
}

/// SHA-256 of `bytes`, as hex: which build a binary is, which text a
/// config is.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
