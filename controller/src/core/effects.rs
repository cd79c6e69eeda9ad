//! The one way effects leave the core.

use formats::wire::ToAgent;

use super::AgentId;
use crate::journal::Entry;

/// What transitions want done outside the tables. The server carries it
/// out with its agent links and journal; the twin plays orders out on its
/// simulated processes; a restart's replay and tests drop or record it.
pub trait Effects {
    /// Whether journal entries are wanted. The twin keeps none, and is
    /// spared building them.
    const JOURNALS: bool;

    /// An order for an agent.
    fn to_agent(&mut self, agent: AgentId, msg: ToAgent);

    /// A change a restart must replay. Called only when [`Self::JOURNALS`].
    fn journal(&mut self, entry: Entry);

    /// An agent reported a job's end and the core took it: once that is
    /// durable, the agent may forget it.
    fn end_taken(&mut self, agent: AgentId, job: u64);
}

/// Effects that go nowhere: a restart's replay (everything it would do was
/// done before), and benchmarks.
pub struct Discard;

impl Effects for Discard {
    const JOURNALS: bool = false;
    fn to_agent(&mut self, _: AgentId, _: ToAgent) {}
    fn journal(&mut self, _: Entry) {}
    fn end_taken(&mut self, _: AgentId, _: u64) {}
}
