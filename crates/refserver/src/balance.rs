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
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The header a forwarded request carries (its value: the entry point's address).
pub const MARKER: &str = "x-bolide-forwarded-by";

/// How long connecting to a peer may take before the next one is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long a peer may take to answer a forwarded request (its first bytes, the upgrade's
/// status line) before the next one is tried: a peer that accepts and never answers is as dead
/// as one that refuses.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(3);
/// A peer that failed is skipped this long, so that later connections do not wait for it.
const SKIP_FOR: Duration = Duration::from_secs(10);

/// Where DDP connections go: this server and its peers, in turn.
#[derive(Debug)]
pub struct Balancer {
    peers: Vec<SocketAddr>,
    next: AtomicU64,
    /// Per peer: until when (ms after `born`) it is skipped; 0 when it is not.
    skip_until_ms: Vec<AtomicU64>,
    born: Instant,
}

impl Default for Balancer {
    fn default() -> Self {
        Balancer::new(Vec::new())
    }
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
        let skip_until_ms = peers.iter().map(|_| AtomicU64::new(0)).collect();
        Balancer { peers, next: AtomicU64::new(0), skip_until_ms, born: Instant::now() }
    }

    fn now_ms(&self) -> u64 {
        self.born.elapsed().as_millis() as u64 + 1
    }

    fn skipped(&self, i: usize) -> bool {
        self.skip_until_ms[i].load(Ordering::Relaxed) > self.now_ms()
    }

    fn failed(&self, i: usize) {
        self.skip_until_ms[i].store(self.now_ms() + SKIP_FOR.as_millis() as u64, Ordering::Relaxed);
    }

    /// Connects to peer `i`, sends it the request and waits for its first answer: the upstream
    /// stream and the bytes it answered with, or None when it refused, did not accept or did not
    /// answer in time.
    async fn ask(&self, i: usize, head: &[u8], leftover: &[u8], me: SocketAddr) -> Option<(TcpStream, Vec<u8>)> {
        let peer = self.peers[i];
        let mut upstream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(peer)).await.ok()?.ok()?;
        let _ = upstream.set_nodelay(true);
        upstream.write_all(&marked(head, me)).await.ok()?;
        upstream.write_all(leftover).await.ok()?;
        let mut first = vec![0u8; 4096];
        let n = tokio::time::timeout(ANSWER_TIMEOUT, upstream.read(&mut first)).await.ok()?.ok()?;
        if n == 0 {
            return None;
        }
        first.truncate(n);
        Some((upstream, first))
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
        // The peer whose turn it is, then the others, should it not answer; peers that failed
        // lately are skipped (tried last, should every other fail too).
        let order: Vec<usize> = (0..self.peers.len()).map(|k| (first + k) % self.peers.len()).collect();
        let (fresh, skipped): (Vec<usize>, Vec<usize>) = order.into_iter().partition(|&i| !self.skipped(i));
        for i in fresh.into_iter().chain(skipped) {
            let Some((mut upstream, answer)) = self.ask(i, head, leftover, me).await else {
                self.failed(i);
                continue;
            };
            self.skip_until_ms[i].store(0, Ordering::Relaxed);
            client.write_all(&answer).await?;
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

    #[tokio::test(flavor = "current_thread")]
    async fn a_peer_that_accepts_and_never_answers_is_skipped() {
        // The second probe: a peer that accepted and never answered took half the users.
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let silent_addr = silent.local_addr().unwrap();
        let answering = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let answering_addr = answering.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = answering.accept().await {
                tokio::spawn(async move {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(b"HTTP/1.1 101 Switching Protocols\r\n\r\n").await;
                });
            }
        });
        let b = Balancer::new(vec![silent_addr, answering_addr]);
        let me: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let head = b"GET /websocket HTTP/1.1\r\nHost: x\r\n\r\n";
        // Peer 0 is silent: the answer comes from peer 1, and peer 0 is marked to skip.
        let (_, answer) = match b.ask(0, head, b"", me).await {
            None => {
                b.failed(0);
                b.ask(1, head, b"", me).await.expect("the answering peer")
            }
            Some(_) => panic!("a silent peer does not answer"),
        };
        assert!(answer.starts_with(b"HTTP/1.1 101"));
        assert!(b.skipped(0) && !b.skipped(1));
        drop(silent);
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
