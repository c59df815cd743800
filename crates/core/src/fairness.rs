//! Fair share of the HTTP bridge's in-flight slots among callers, in the
//! spirit of the apiserver's API Priority and Fairness: requests queue per
//! identity (the user a bearer token resolved to), each identity holds at
//! most [`Shares::per_caller`] slots and queues at most
//! [`Shares::queued_per_caller`] requests, and a freed slot goes
//! round-robin to the next identity with queued work. One identity flooding
//! the bridge fills its own share and queue, never the others'.
//!
//! The per-caller share is a hard cap, not work-conserving: a lone caller
//! never uses more than its share even when the bridge is idle, so what a
//! caller gets does not depend on who else happens to be quiet at the time
//! (and the apiserver behind, with its own fairness, sees the same bound).
//!
//! This is the decision only, without clocks or channels: the bridge's
//! shell (`handoff_bridge::fair`) hands out the grants, times out waiters
//! and releases slots when requests end. Memory is bounded: an identity
//! with nothing in flight and nothing queued is forgotten, so at most
//! `max_in_flight + max_queued` identities are remembered.

use std::collections::{HashMap, VecDeque};

/// The bounds of the fair share (flags of `handoff mcp --listen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Most requests in flight in all.
    pub max_in_flight: usize,
    /// Most requests in flight of one identity.
    pub per_caller: usize,
    /// Most requests one identity may have waiting.
    pub queued_per_caller: usize,
    /// Most requests waiting in all.
    pub max_queued: usize,
}

/// A queued request's ticket, unique within one [`Fairness`].
pub type Ticket = u64;

/// What becomes of a request that asks for a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Served now: the caller holds a slot until [`Fairness::release`].
    Granted,
    /// Waits for a slot with this ticket (see [`Fairness::release`] and
    /// [`Fairness::cancel`]).
    Queued(Ticket),
    /// Refused at once: no room in the queue.
    Refused(Refusal),
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The caller holds its whole share and its queue is full (or it was
    /// waiting behind its own share when its wait ran out): HTTP 429.
    OverShare,
    /// The bridge as a whole is full while the caller is within its share:
    /// HTTP 503.
    Overloaded,
}

impl Refusal {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OverShare => "over_share",
            Self::Overloaded => "overloaded",
        }
    }
}

/// What [`Fairness::cancel`] found of a ticket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancelled {
    /// It was still waiting and no longer is; the refusal says why it
    /// waited (its own share full, or the bridge's).
    Waiting(Refusal),
    /// It was granted a slot already (the caller holds it and must
    /// release it).
    Granted,
}

/// One identity's slots in use and its waiting tickets, oldest first.
#[derive(Debug, Default)]
struct Caller {
    in_flight: usize,
    queue: VecDeque<Ticket>,
}

/// The fair share's state.
#[derive(Debug)]
pub struct Fairness {
    shares: Shares,
    callers: HashMap<String, Caller>,
    /// Identities with queued work, in the order they are served next.
    turns: VecDeque<String>,
    in_flight: usize,
    queued: usize,
    next_ticket: Ticket,
}

impl Fairness {
    /// Nothing in flight, nothing queued.
    pub fn new(shares: Shares) -> Self {
        Self {
            shares,
            callers: HashMap::new(),
            turns: VecDeque::new(),
            in_flight: 0,
            queued: 0,
            next_ticket: 0,
        }
    }

    /// Requests in flight in all.
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Requests waiting in all.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Identities remembered (each with something in flight or queued).
    pub fn callers(&self) -> usize {
        self.callers.len()
    }

    /// A request of `identity` asks for a slot: granted when its share and
    /// the bridge have room and nothing of its own waits before it; queued
    /// when its queue and the total queue have room; refused otherwise.
    pub fn admit(&mut self, identity: &str) -> Admission {
        let (in_flight, waiting) = self
            .callers
            .get(identity)
            .map_or((0, 0), |c| (c.in_flight, c.queue.len()));
        let own_room = in_flight < self.shares.per_caller;
        if own_room && waiting == 0 && self.in_flight < self.shares.max_in_flight {
            self.callers
                .entry(identity.to_owned())
                .or_default()
                .in_flight += 1;
            self.in_flight += 1;
            return Admission::Granted;
        }
        if waiting >= self.shares.queued_per_caller || self.queued >= self.shares.max_queued {
            return Admission::Refused(if own_room {
                Refusal::Overloaded
            } else {
                Refusal::OverShare
            });
        }
        let ticket = self.next_ticket;
        self.next_ticket = self.next_ticket.wrapping_add(1);
        let caller = self.callers.entry(identity.to_owned()).or_default();
        caller.queue.push_back(ticket);
        if caller.queue.len() == 1 {
            self.turns.push_back(identity.to_owned());
        }
        self.queued += 1;
        Admission::Queued(ticket)
    }

    /// A request of `identity` that held a slot ended; returns the tickets
    /// granted the freed room, each with its identity, round-robin among
    /// the identities with queued work.
    pub fn release(&mut self, identity: &str) -> Vec<(String, Ticket)> {
        if let Some(caller) = self.callers.get_mut(identity)
            && caller.in_flight > 0
        {
            caller.in_flight -= 1;
            self.in_flight -= 1;
            self.forget_if_idle(identity);
        }
        self.grants()
    }

    /// A waiting request gave up (its wait ran out, or its client left).
    /// When it was granted already, the caller holds a slot and must
    /// [`release`](Self::release) it.
    pub fn cancel(&mut self, identity: &str, ticket: Ticket) -> Cancelled {
        let Some(caller) = self.callers.get_mut(identity) else {
            return Cancelled::Granted;
        };
        let Some(at) = caller.queue.iter().position(|t| *t == ticket) else {
            return Cancelled::Granted;
        };
        caller.queue.remove(at);
        let why = if caller.in_flight >= self.shares.per_caller {
            Refusal::OverShare
        } else {
            Refusal::Overloaded
        };
        if caller.queue.is_empty() {
            self.turns.retain(|t| t != identity);
        }
        self.queued -= 1;
        self.forget_if_idle(identity);
        Cancelled::Waiting(why)
    }

    /// Hands free slots to waiting tickets: each identity in turn gets one
    /// (when within its share) and goes to the back of the line while it
    /// still has work; stops when the bridge is full or a whole round
    /// granted nothing.
    fn grants(&mut self) -> Vec<(String, Ticket)> {
        let mut granted = Vec::new();
        let mut idle_turns = 0;
        while self.in_flight < self.shares.max_in_flight && idle_turns < self.turns.len() {
            let Some(identity) = self.turns.pop_front() else {
                break;
            };
            let Some(caller) = self.callers.get_mut(&identity) else {
                continue;
            };
            if caller.in_flight >= self.shares.per_caller {
                self.turns.push_back(identity);
                idle_turns += 1;
                continue;
            }
            let Some(ticket) = caller.queue.pop_front() else {
                continue;
            };
            caller.in_flight += 1;
            self.in_flight += 1;
            self.queued -= 1;
            idle_turns = 0;
            if !caller.queue.is_empty() {
                self.turns.push_back(identity.clone());
            }
            granted.push((identity, ticket));
        }
        granted
    }

    fn forget_if_idle(&mut self, identity: &str) {
        if self
            .callers
            .get(identity)
            .is_some_and(|c| c.in_flight == 0 && c.queue.is_empty())
        {
            self.callers.remove(identity);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One step of a script and what it must answer.
    enum Step {
        Admit(&'static str, Admission),
        Release(&'static str, &'static [(&'static str, Ticket)]),
        Cancel(&'static str, Ticket, Cancelled),
        /// In flight, queued, identities remembered.
        Counts(usize, usize, usize),
    }
    use Admission::{Granted, Queued, Refused};
    use Step::{Admit, Cancel, Counts, Release};

    const SHARES: Shares = Shares {
        max_in_flight: 3,
        per_caller: 2,
        queued_per_caller: 2,
        max_queued: 3,
    };

    fn run(name: &str, shares: Shares, script: &[Step]) {
        let mut fair = Fairness::new(shares);
        for (i, step) in script.iter().enumerate() {
            match step {
                Admit(who, want) => assert_eq!(fair.admit(who), *want, "{name}: step {i}"),
                Release(who, want) => {
                    let got = fair.release(who);
                    let want: Vec<_> = want.iter().map(|(w, t)| ((*w).to_owned(), *t)).collect();
                    assert_eq!(got, want, "{name}: step {i}");
                }
                Cancel(who, ticket, want) => {
                    assert_eq!(fair.cancel(who, *ticket), *want, "{name}: step {i}")
                }
                Counts(in_flight, queued, callers) => assert_eq!(
                    (fair.in_flight(), fair.queued(), fair.callers()),
                    (*in_flight, *queued, *callers),
                    "{name}: step {i}"
                ),
            }
        }
    }

    #[test]
    fn scripts() {
        let cases: Vec<(&str, Shares, Vec<Step>)> = vec![
            (
                "a caller gets its share, then queues, then is over its share",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("a", Queued(0)),
                    Admit("a", Queued(1)),
                    Admit("a", Refused(Refusal::OverShare)),
                    Counts(2, 2, 1),
                ],
            ),
            (
                "another caller is served beside a greedy one",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("a", Queued(0)),
                    Admit("b", Granted),
                    Counts(3, 1, 2),
                ],
            ),
            (
                "a full bridge queues a caller within its share; a full queue is overload",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("b", Granted),
                    Admit("b", Queued(0)),
                    Admit("c", Queued(1)),
                    Admit("c", Queued(2)),
                    Admit("d", Refused(Refusal::Overloaded)),
                    Counts(3, 3, 3),
                ],
            ),
            (
                "freed slots go round-robin among callers with work",
                Shares {
                    max_in_flight: 2,
                    per_caller: 2,
                    queued_per_caller: 4,
                    max_queued: 8,
                },
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("a", Queued(0)),
                    Admit("a", Queued(1)),
                    Admit("b", Queued(2)),
                    Admit("b", Queued(3)),
                    Admit("c", Queued(4)),
                    Release("a", &[("a", 0)]),
                    Release("a", &[("b", 2)]),
                    Release("a", &[("c", 4)]),
                    Release("b", &[("a", 1)]),
                    Release("c", &[("b", 3)]),
                    Release("a", &[]),
                    Release("b", &[]),
                    Counts(0, 0, 0),
                ],
            ),
            (
                "a caller at its share is skipped; its turn waits",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("b", Granted),
                    Admit("a", Queued(0)),
                    Admit("c", Queued(1)),
                    Release("b", &[("c", 1)]),
                    Release("c", &[]),
                    Counts(2, 1, 1),
                    Release("a", &[("a", 0)]),
                    Counts(2, 0, 1),
                ],
            ),
            (
                "a caller with work waiting does not overtake it",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("b", Granted),
                    Admit("c", Granted),
                    Admit("a", Queued(0)),
                    Release("b", &[("a", 0)]),
                    Admit("b", Queued(1)),
                ],
            ),
            (
                "a cancelled wait leaves the queue and an idle caller is forgotten",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("a", Queued(0)),
                    Admit("b", Granted),
                    Admit("b", Queued(1)),
                    Cancel("a", 0, Cancelled::Waiting(Refusal::OverShare)),
                    Cancel("b", 1, Cancelled::Waiting(Refusal::Overloaded)),
                    Release("b", &[]),
                    Counts(2, 0, 1),
                    Release("a", &[]),
                    Release("a", &[]),
                    Counts(0, 0, 0),
                ],
            ),
            (
                "a granted ticket cannot be cancelled; a stray release changes nothing",
                SHARES,
                vec![
                    Admit("a", Granted),
                    Admit("a", Granted),
                    Admit("a", Queued(0)),
                    Release("a", &[("a", 0)]),
                    Cancel("a", 0, Cancelled::Granted),
                    Cancel("z", 7, Cancelled::Granted),
                    Release("z", &[]),
                    Counts(2, 0, 1),
                ],
            ),
        ];
        for (name, shares, script) in cases {
            run(name, shares, &script);
        }
    }

    #[test]
    fn in_flight_never_passes_either_bound() {
        let shares = Shares {
            max_in_flight: 5,
            per_caller: 2,
            queued_per_caller: 3,
            max_queued: 6,
        };
        let mut fair = Fairness::new(shares);
        let mut held: Vec<String> = Vec::new();
        let mut per: HashMap<String, usize> = HashMap::new();
        for round in 0..400usize {
            let who = format!("c{}", round * 7 % 5);
            if round % 3 == 2 && !held.is_empty() {
                let gone = held.remove(round % held.len());
                *per.entry(gone.clone()).or_default() -= 1;
                for (granted, _) in fair.release(&gone) {
                    *per.entry(granted.clone()).or_default() += 1;
                    held.push(granted);
                }
            } else if fair.admit(&who) == Granted {
                *per.entry(who.clone()).or_default() += 1;
                held.push(who);
            }
            assert_eq!(fair.in_flight(), held.len());
            assert!(fair.in_flight() <= shares.max_in_flight);
            assert!(fair.queued() <= shares.max_queued);
            assert!(per.values().all(|n| *n <= shares.per_caller), "{per:?}");
        }
    }
}
