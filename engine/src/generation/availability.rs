//! Whether an endpoint is serving, judged from what its requests and health checks say, and
//! whose fault a failed try was: its sample's (the try counts against the sample's attempts)
//! or an outage's (it does not).
//!
//! - A failure that is plainly the server's marks the endpoint down at once: the connection
//!   refused, a gateway status (502, 503, 504), 429, or the server refusing every request the
//!   same way (401, 403, 404 for the model). So does a failing `/health`.
//! - An ambiguous failure (HTTP 500, an error chunk, a stream cut mid-way, an idle timeout) may
//!   be either. Its verdict waits for the next evidence: the server serving a request sent after
//!   the failure (another try, or a probe) says the failure was the sample's own, and it counts;
//!   the endpoint going down first says it was the outage's, and it does not. A request sent
//!   before the failure proves nothing by finishing: an engine that fails every new request
//!   still finishes the streams it had started.
//! - Three ambiguous failures in a row with no success between them make the endpoint suspect:
//!   dispatch pauses and the server is probed with a tiny request. A probe that fails confirms
//!   the outage (an engine that died behind a live API process fails every request the same
//!   way: no sample fails for it); one that succeeds clears the suspicion and the failures
//!   count (a run whose last samples all fail on their own still ends).
//! - A down endpoint takes no new requests until `/health` answers and a probe succeeds.
//!
//! Pure state, no I/O: the endpoint's watch feeds it and wakes those waiting for a verdict.

use crate::vllm::{Failure, FailureKind};

/// Ambiguous failures in a row, with no success between them, that mark an endpoint down.
pub const TRIP_AFTER: u32 = 3;

/// What a failed try says about its endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blame {
    /// The sample's own (a 400 such as "context too long", its deadline): counts at once.
    Sample,
    /// The server's: the endpoint is down, and the try does not count.
    Endpoint,
    /// Either; the verdict waits for what the endpoint does next.
    Unknown,
}

pub fn blame(failure: &Failure) -> Blame {
    match failure.kind {
        FailureKind::Connect => Blame::Endpoint,
        FailureKind::Http { status } => match status {
            // Every request would get the same answer: a proxy without its upstream, a server
            // shedding load, a changed key or model. Not any one sample's fault.
            401 | 403 | 404 | 429 | 502 | 503 | 504 => Blame::Endpoint,
            500..=599 | 408 | 409 | 425 => Blame::Unknown,
            _ => Blame::Sample,
        },
        FailureKind::ErrorChunk | FailureKind::Disconnected | FailureKind::IdleTimeout => Blame::Unknown,
        FailureKind::Deadline | FailureKind::Protocol => Blame::Sample,
    }
}

/// A request's place in the order requests were sent to the endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Sent(u64);

/// Taken when an ambiguous failure happens: what the endpoint had seen by then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ticket {
    /// The last request sent when the failure happened.
    sent: Sent,
    outages: u64,
    /// Failed while the endpoint was already down (a try that started just before).
    while_down: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The endpoint served other requests afterwards: the failure counts against its sample.
    Counted,
    /// The endpoint went down: the failure was the outage's.
    Outage,
    /// Nothing has happened since.
    Pending,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum State {
    #[default]
    Up,
    /// Failures in a row: paused until a probe says whose fault they were.
    Suspect(String),
    /// An outage, confirmed.
    Down(String),
}

#[derive(Clone, Debug, Default)]
pub struct Availability {
    state: State,
    /// Requests sent so far.
    sent: u64,
    /// The latest-sent request that the server served.
    latest_served: Sent,
    /// The last request sent when the latest ambiguous failure happened.
    latest_failed: Sent,
    /// Confirmed outages so far.
    outages: u64,
    /// Ambiguous failures since the server last served a request sent after them.
    in_a_row: u32,
}

impl Availability {
    /// Whether to send requests.
    pub fn is_up(&self) -> bool {
        self.state == State::Up
    }

    /// Why the endpoint takes no requests, while it does not.
    pub fn down_reason(&self) -> Option<&str> {
        match &self.state {
            State::Up => None,
            State::Suspect(reason) | State::Down(reason) => Some(reason),
        }
    }

    /// Whether a probe request should be sent now: to settle a suspicion, or to see whether
    /// a down endpoint serves again once its `/health` answers.
    pub fn wants_probe(&self, health_ok: bool) -> bool {
        match self.state {
            State::Up => false,
            State::Suspect(_) => true,
            State::Down(_) => health_ok,
        }
    }

    /// A request is being sent: its place in the order.
    pub fn send(&mut self) -> Sent {
        self.sent += 1;
        Sent(self.sent)
    }

    /// The server answered the request `sent`.
    pub fn success(&mut self, sent: Sent) {
        self.latest_served = self.latest_served.max(sent);
        if sent > self.latest_failed {
            self.in_a_row = 0;
        }
    }

    /// Marks the outage confirmed; `true` when the endpoint was taking requests.
    pub fn down(&mut self, reason: impl Into<String>) -> bool {
        self.in_a_row = 0;
        let was_up = self.is_up();
        if !matches!(self.state, State::Down(_)) {
            self.outages += 1;
            self.state = State::Down(reason.into());
        }
        was_up
    }

    /// Records an ambiguous failure (which may make the endpoint suspect) and returns its
    /// ticket.
    pub fn ambiguous(&mut self, reason: &str) -> Ticket {
        let sent = Sent(self.sent);
        self.latest_failed = sent;
        let ticket = Ticket { sent, outages: self.outages, while_down: matches!(self.state, State::Down(_)) };
        if self.is_up() {
            self.in_a_row += 1;
            if self.in_a_row >= TRIP_AFTER {
                self.state =
                    State::Suspect(format!("{TRIP_AFTER} requests in a row failed; the last: {reason}"));
            }
        }
        ticket
    }

    pub fn verdict(&self, ticket: Ticket) -> Verdict {
        if ticket.while_down || self.outages > ticket.outages {
            Verdict::Outage
        } else if self.latest_served > ticket.sent {
            Verdict::Counted
        } else {
            Verdict::Pending
        }
    }

    /// A probe request succeeded: the server serves (and `/health` answers, for a down one).
    /// The probe was sent after every failure it was sent to judge.
    pub fn probe_succeeded(&mut self) {
        self.state = State::Up;
        let probe = self.send();
        self.success(probe);
    }

    /// A probe request failed: a suspicion becomes an outage; while up, it is one more
    /// ambiguous failure.
    pub fn probe_failed(&mut self, reason: &str) {
        match self.state {
            State::Suspect(_) => {
                self.down(format!("a probe request failed too: {reason}"));
            }
            State::Up => {
                self.ambiguous(reason);
            }
            State::Down(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vllm::Partial;
    use std::time::Duration;

    fn failure(kind: FailureKind) -> Failure {
        Failure { kind, message: String::new(), partial: Partial::default(), duration: Duration::ZERO }
    }

    #[test]
    fn who_is_to_blame_for_each_kind_of_failure() {
        let http = |status| blame(&failure(FailureKind::Http { status }));
        assert_eq!(blame(&failure(FailureKind::Connect)), Blame::Endpoint);
        for status in [502, 503, 504, 429, 404, 401] {
            assert_eq!(http(status), Blame::Endpoint, "{status}");
        }
        for status in [500, 501, 408] {
            assert_eq!(http(status), Blame::Unknown, "{status}");
        }
        assert_eq!(http(400), Blame::Sample);
        assert_eq!(http(422), Blame::Sample);
        for kind in [FailureKind::ErrorChunk, FailureKind::Disconnected, FailureKind::IdleTimeout] {
            assert_eq!(blame(&failure(kind)), Blame::Unknown, "{kind:?}");
        }
        assert_eq!(blame(&failure(FailureKind::Deadline)), Blame::Sample);
    }

    #[test]
    fn a_failure_counts_once_the_endpoint_serves_another_request() {
        let mut a = Availability::default();
        let before = a.send();
        let ticket = a.ambiguous("HTTP 500");
        a.success(before);
        assert_eq!(a.verdict(ticket), Verdict::Pending, "a request sent before the failure proves nothing");
        let after = a.send();
        a.success(after);
        assert_eq!(a.verdict(ticket), Verdict::Counted);
        assert!(a.is_up());
    }

    #[test]
    fn a_stream_sent_before_the_failure_proves_nothing_by_finishing() {
        // An engine failing every new request still finishes the streams it had started.
        let mut a = Availability::default();
        let old: Vec<Sent> = (0..5).map(|_| a.send()).collect();
        let mut tickets = Vec::new();
        for (i, &stream) in old.iter().enumerate() {
            tickets.push(a.ambiguous("HTTP 500: EngineCore died"));
            a.success(stream);
            assert_eq!(a.verdict(tickets[i]), Verdict::Pending);
        }
        assert!(!a.is_up(), "the old streams finishing does not reset the failures in a row");
        a.probe_failed("HTTP 500: EngineCore died");
        assert!(tickets.iter().all(|t| a.verdict(*t) == Verdict::Outage));
    }

    #[test]
    fn failures_in_a_row_pause_the_endpoint_and_a_failed_probe_makes_them_the_outages() {
        let mut a = Availability::default();
        let tickets: Vec<Ticket> =
            (0..TRIP_AFTER).map(|_| a.ambiguous("HTTP 500: EngineCore died")).collect();
        assert!(!a.is_up());
        assert!(a.wants_probe(true));
        assert!(a.down_reason().unwrap().contains("3 requests in a row failed"), "{:?}", a.down_reason());
        for ticket in &tickets {
            assert_eq!(a.verdict(*ticket), Verdict::Pending, "a suspicion decides nothing yet");
        }
        a.probe_failed("HTTP 500: EngineCore died");
        for ticket in &tickets {
            assert_eq!(a.verdict(*ticket), Verdict::Outage);
        }
        // A try cut while the endpoint is down was the outage's too, even after it recovers.
        let late = a.ambiguous("stream cut");
        assert!(!a.wants_probe(false), "a down endpoint is probed only once /health answers");
        a.probe_succeeded();
        assert!(a.is_up());
        assert_eq!(a.verdict(tickets[0]), Verdict::Outage, "a recovery does not turn an outage into a count");
        assert_eq!(a.verdict(late), Verdict::Outage);
    }

    #[test]
    fn failures_in_a_row_count_when_the_probe_succeeds() {
        // The last samples of a run that all fail on their own: the server answers the probe.
        let mut a = Availability::default();
        let tickets: Vec<Ticket> = (0..TRIP_AFTER).map(|_| a.ambiguous("HTTP 500: bad input")).collect();
        assert!(!a.is_up());
        a.probe_succeeded();
        assert!(a.is_up());
        for ticket in tickets {
            assert_eq!(a.verdict(ticket), Verdict::Counted);
        }
    }

    #[test]
    fn a_success_between_failures_keeps_the_endpoint_up() {
        let mut a = Availability::default();
        for _ in 0..10 {
            a.ambiguous("HTTP 500");
            a.ambiguous("HTTP 500");
            let next = a.send();
            a.success(next);
        }
        assert!(a.is_up());
    }

    #[test]
    fn a_plain_outage_fails_the_tries_already_waiting_for_a_verdict() {
        let mut a = Availability::default();
        let waiting = a.ambiguous("stream cut");
        assert!(a.down("connection refused"));
        assert!(!a.down("connection refused again"), "already down");
        assert_eq!(a.verdict(waiting), Verdict::Outage);
        assert_eq!(a.down_reason(), Some("connection refused"));
        a.probe_failed("still refused");
        assert_eq!(a.down_reason(), Some("connection refused"));
    }
}
