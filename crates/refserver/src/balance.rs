//! The Cluster-like balancer mode: an entry point that serves some DDP connections itself and
//! forwards the others to its peers, round-robin, before the WebSocket upgrade is answered (as
//! MeteorHacks' Cluster forwards a connection before the WebSocket is made). The forwarded
//! request carries a marker header, so that a peer that balances too serves it itself: in the
//! all-balancers shape every server is an entry point and no connection travels twice.
//!
//! Forwarding is a byte pipe from then on: the peer answers the upgrade and runs the session, and
//! the entry point spends its CPU copying frames both ways, which is what the Cluster test's "CPU
//! of the entry point" measures.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The header a forwarded request carries (its value: the entry point's address).
pub const MARKER: &str = "x-bolide-forwarded-by";

/// How long connecting to a peer may take before the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

/// Where DDP connections go: this server and its peers, in turn.
#[derive(Debug, Default)]
pub struct Balancer {
    peers: Vec<SocketAddr>,
    next: AtomicU64,
}

/// Where the balancer sent connections so far.
#[derive(Debug, Default)]
pub struct BalanceCounters {
    /// Connections handed to a peer.
    pub forwarded: AtomicU64,
    /// Connections this server kept as the entry point (its turn in the round).
    pub kept: AtomicU64,
    /// Connections a peer should have had but that could not reach any (served here instead).
    pub peer_failures: AtomicU64,
}

impl Balancer {
    pub fn new(peers: Vec<SocketAddr>) -> Balancer {
        Balancer { peers, next: AtomicU64::new(0) }
    }

    /// Whether there are peers to balance over.
    pub fn is_active(&self) -> bool {
        !self.peers.is_empty()
    }

    /// The peers, in the order connections go to them.
    pub fn peers(&self) -> &[SocketAddr] {
        &self.peers
    }

    /// The next turn: None for this server, else the peer whose turn it is.
    fn turn(&self) -> Option<usize> {
        let n = self.next.fetch_add(1, Ordering::Relaxed) % (self.peers.len() as u64 + 1);
        (n > 0).then(|| n as usize - 1)
    }

    /// Forwards the connection whose request head is `head` (and what was read past it,
    /// `leftover`) if it is a peer's turn, and pipes it until either side closes; gives the
    /// stream back when this server should serve it itself (its own turn, or no peer answered).
    pub async fn route(
        &self,
        mut client: TcpStream,
        head: &[u8],
        leftover: &[u8],
        me: SocketAddr,
        counters: &BalanceCounters,
    ) -> io::Result<Option<TcpStream>> {
        let Some(first) = self.turn() else {
            counters.kept.fetch_add(1, Ordering::Relaxed);
            return Ok(Some(client));
        };
        // The peer whose turn it is, then the others, should it not answer.
        for i in 0..self.peers.len() {
            let peer = self.peers[(first + i) % self.peers.len()];
            let Ok(Ok(mut upstream)) = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(peer)).await else {
                continue;
            };
            let _ = upstream.set_nodelay(true);
            upstream.write_all(&marked(head, me)).await?;
            upstream.write_all(leftover).await?;
            counters.forwarded.fetch_add(1, Ordering::Relaxed);
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            return Ok(None);
        }
        counters.peer_failures.fetch_add(1, Ordering::Relaxed);
        Ok(Some(client))
    }
}

/// The request head with the marker header added before its blank line.
fn marked(head: &[u8], me: SocketAddr) -> Vec<u8> {
    let body_start = head.len().saturating_sub(2);
    let mut out = Vec::with_capacity(head.len() + 48);
    out.extend_from_slice(&head[..body_start]);
    out.extend_from_slice(format!("X-Bolide-Forwarded-By: {me}\r\n\r\n").as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_go_round_this_server_first() {
        let peers: Vec<SocketAddr> = vec!["127.0.0.1:1".parse().unwrap(), "127.0.0.1:2".parse().unwrap()];
        let b = Balancer::new(peers);
        let turns: Vec<Option<usize>> = (0..7).map(|_| b.turn()).collect();
        assert_eq!(turns, [None, Some(0), Some(1), None, Some(0), Some(1), None]);
    }

    #[test]
    fn the_marker_goes_before_the_blank_line() {
        let head = b"GET /websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n";
        let out = marked(head, "127.0.0.1:3001".parse().unwrap());
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /websocket HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nX-Bolide-Forwarded-By: 127.0.0.1:3001\r\n\r\n"
        );
    }
}
