//! Where a client command finds the cluster a config describes: the
//! controllers' addresses and the shared secret, handed to the client
//! crate, which knows nothing of configs.

use std::path::Path;

use anyhow::{bail, Result};

use super::Cluster;

impl Cluster {
    /// The controllers to ask: `--addr` (one address, or a comma-separated
    /// list), else the config's `[controller] hosts`, else the address the
    /// controller wrote into its state directory, else the config's
    /// `listen`.
    pub fn client_address(&self, flag: Option<&str>) -> String {
        if let Some(a) = flag {
            return a.to_string();
        }
        if !self.controllers.is_empty() {
            return self.controllers.join(",");
        }
        std::fs::read_to_string(self.state_dir.join(crate::ADDRESS_FILE))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.listen.clone())
    }

    /// The shared secret: the `--secret-file` given, else the config's.
    pub fn client_secret(&self, flag: Option<&Path>) -> Result<Vec<u8>> {
        let path = flag.unwrap_or(&self.secret_file);
        // A missing file most likely means no controller has started with
        // this config yet (it creates the secret); any other problem with
        // the file (readable by everyone, empty) is said as it is.
        if !path.exists() {
            bail!(
                "no secret file {} for {}: is the controller running? (it creates the secret \
                 on first start; or give --secret-file)",
                path.display(),
                self.source.display()
            );
        }
        client::read_secret(path)
    }
}
