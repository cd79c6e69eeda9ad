//! `[controller] hosts`: a primary and its backup, and the rule that a
//! takeover comes before the agents give up on their controller.

use std::time::Duration;

use super::{AgentsSection, ControllerSection};

/// The controllers' addresses, the primary first, and the takeover
/// timeout, checked. `witnesses`: the config lists the agent hosts.
pub(super) fn of(
    c: &ControllerSection,
    a: &AgentsSection,
    witnesses: bool,
    heartbeat_timeout: Duration,
) -> Result<(Vec<String>, Duration), String> {
    let controllers = c.hosts.clone().unwrap_or_default();
    for (i, addr) in controllers.iter().enumerate() {
        if controllers[..i].contains(addr) {
            return Err(format!("controller.hosts lists {addr} twice"));
        }
    }
    if controllers.len() > 2 {
        return Err(format!(
            "controller.hosts lists {} controllers: one primary and one backup are supported",
            controllers.len()
        ));
    }
    let takeover_timeout = match c.takeover_timeout_s {
        None => Duration::from_secs(3),
        Some(s) if s.is_finite() && s > 0.0 && s <= 3600.0 => Duration::from_secs_f64(s),
        Some(s) => {
            return Err(format!(
                "controller.takeover_timeout_s = {s}: give seconds in (0, 3600]"
            ))
        }
    };
    match controllers.len() {
        0 => return Ok((controllers, takeover_timeout)),
        1 => {
            return Err(format!(
                "controller.hosts lists one controller ({}): list the primary and its backup, \
                 or leave hosts out for a controller alone",
                controllers[0]
            ))
        }
        _ => {}
    }
    if !witnesses {
        return Err(
            "controller.hosts lists a backup controller: list the agent hosts \
                    ([[agents.host]]), which witness which controller leads"
                .into(),
        );
    }
    if 2 * takeover_timeout >= heartbeat_timeout {
        return Err(format!(
            "controller.takeover_timeout_s ({:.1} s) must be under half of \
             agents.heartbeat_timeout_ms ({} ms): agents kill the jobs of a lost controller \
             after half that timeout, and a takeover must come first",
            takeover_timeout.as_secs_f64(),
            heartbeat_timeout.as_millis()
        ));
    }
    if c.secret_file.is_none() {
        return Err(
            "controller.hosts lists a backup controller: name the secret_file that \
                    every controller and agent reads (each controller's state_dir is its own)"
                .into(),
        );
    }
    if a.local.unwrap_or(false) {
        return Err(
            "controller.hosts lists a backup controller, but agents.local = true: \
                    agents in the controller's process die with it; run them on their own hosts"
                .into(),
        );
    }
    Ok((controllers, takeover_timeout))
}
