//! What the controller's benchmarks share.

use std::sync::Arc;

use controller::config::Cluster as Config;
use controller::core::{Cluster, Discard, Now};

/// A cluster of `config` with every host's agent up (agent ids from 1, in
/// the config's order of hosts); exits with `bench`'s name on an error.
pub fn cluster_up(bench: &str, config: &Arc<Config>, now: Now) -> Cluster {
    let mut cluster = Cluster::new(Arc::clone(config));
    for (i, host) in config.hosts.iter().enumerate() {
        let nodes = config.fold(&host.nodes);
        let first = &config.nodes[host.nodes[0]];
        if let Err(e) = cluster.agent_up(
            i as u64 + 1,
            &host.name,
            &nodes,
            first.cpus,
            first.memory_mb,
            true,
            &[],
            now,
            &mut Discard,
        ) {
            eprintln!("{bench}: {e}");
            std::process::exit(2);
        }
    }
    cluster
}
