//! The control link: how the two ends of a pair talk outside the measured path.
//!
//! A [`PeerLink`] carries small control messages between the two ends of a pair: the
//! handshake, endpoint info (TCP port or verbs QPN/GID/rkey), side results such as the
//! responder's CPU use. Two implementations: the standalone TCP control connection
//! (perftest style, `bench-lat` / `bench-lat HOST`) and MPI point-to-point between the two
//! ranks of a pair (`mpirun`/`srun`). Transports only see the trait.

use std::net::IpAddr;

use anyhow::Result;
use serde::de::DeserializeOwned;
use serde::Serialize;

/// A reliable, ordered message channel to the other end of a pair, with a timeout on
/// every wait.
pub trait PeerLink {
    /// Sends one message (framed: the other end receives it whole).
    fn send(&mut self, payload: &[u8]) -> Result<()>;
    /// The next message, whole; an error when the peer is gone or the wait times out.
    fn recv(&mut self) -> Result<Vec<u8>>;
    /// The local address the peer reached us on, when the link knows it (the standalone
    /// control connection does; MPI does not).
    fn local_ip(&self) -> Option<IpAddr>;
}

/// Sends a value as JSON over a link.
pub fn send_json<T: Serialize>(link: &mut dyn PeerLink, value: &T) -> Result<()> {
    link.send(&serde_json::to_vec(value)?)
}

/// Receives a JSON value from a link. A peer that gave up (see [`send_abort`]) turns the
/// wait into an error carrying its reason, whatever message was expected.
pub fn recv_json<T: DeserializeOwned>(link: &mut dyn PeerLink) -> Result<T> {
    let bytes = link.recv()?;
    if bytes.starts_with(ABORT_PREFIX) {
        let why = crate::wire::decode_json::<Abort>(&bytes)
            .map(|a| a.fabcheck_abort)
            .unwrap_or_else(|_| "no reason given".into());
        anyhow::bail!("the peer gave up: {why}");
    }
    crate::wire::decode_json(&bytes)
}

/// The message a side sends when it cannot go on with a pair, so the other side stops
/// waiting at once and records the same failure with the peer's reason beside its own.
#[derive(serde::Serialize, serde::Deserialize)]
struct Abort {
    fabcheck_abort: String,
}

const ABORT_PREFIX: &[u8] = b"{\"fabcheck_abort\":";

/// Tells the peer this side gave up on the pair, and why (best effort: the link may be
/// what broke).
pub fn send_abort(link: &mut dyn PeerLink, why: &str) {
    let _ = send_json(
        link,
        &Abort {
            fabcheck_abort: why.to_string(),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    /// A link whose two ends are one queue: what one side sends, the other receives.
    struct Loop(std::collections::VecDeque<Vec<u8>>);

    impl PeerLink for Loop {
        fn send(&mut self, payload: &[u8]) -> Result<()> {
            self.0.push_back(payload.to_vec());
            Ok(())
        }
        fn recv(&mut self) -> Result<Vec<u8>> {
            self.0.pop_front().context("nothing sent")
        }
        fn local_ip(&self) -> Option<IpAddr> {
            None
        }
    }

    #[test]
    fn an_abort_ends_any_wait_with_the_peers_reason() {
        let mut l = Loop(Default::default());
        send_json(&mut l, &42u32).unwrap();
        assert_eq!(recv_json::<u32>(&mut l).unwrap(), 42);
        send_abort(&mut l, "work completion failed: IBV_WC_RETRY_EXC_ERR");
        let e = recv_json::<Vec<String>>(&mut l).unwrap_err().to_string();
        assert_eq!(
            e,
            "the peer gave up: work completion failed: IBV_WC_RETRY_EXC_ERR"
        );
        // An ordinary object with other keys is not mistaken for an abort.
        send_json(&mut l, &serde_json::json!({"fabcheck": 1})).unwrap();
        assert!(recv_json::<serde_json::Value>(&mut l).is_ok());
    }
}
