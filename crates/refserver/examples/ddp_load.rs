//! Load for `bench/refserver-capacity.sh` (not a test): opens DDP sessions to a reference server on
//! loopback and either holds them idle (answering heartbeats) or calls a trivial method in a loop.
//!
//!   ddp_load idle ADDR SESSIONS SECONDS    hold SESSIONS idle sessions for SECONDS
//!   ddp_load calls ADDR SESSIONS SECONDS   each session calls fetchTasks back to back
//!
//! Prints one JSON line: sessions connected, failures, pings answered, calls completed, calls/s.
//! Only loopback addresses are accepted.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use ddp::ws::{self, Incoming, Opcode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[derive(Default)]
struct Counts {
    connected: Cell<u64>,
    failed: Cell<u64>,
    pings: Cell<u64>,
    calls: Cell<u64>,
}

async fn session(addr: SocketAddr, calls: bool, until: Instant, counts: Rc<Counts>) -> Result<(), String> {
    let mut s = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let key = ws::client_key();
    let req = format!("GET /websocket HTTP/1.1\r\nHost: {addr}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n");
    s.write_all(req.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = s.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("closed during the handshake".into());
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    if !buf.starts_with(b"HTTP/1.1 101") {
        return Err(String::from_utf8_lossy(&buf[..head_end]).lines().next().unwrap_or_default().to_string());
    }
    buf.drain(..head_end);
    let send = |text: &str| {
        let mut wire = Vec::new();
        ws::encode_frame(&mut wire, Opcode::Text, false, text.as_bytes(), Some(rand::random()));
        wire
    };
    s.write_all(&send(r#"{"msg":"connect","version":"1","support":["1","pre2","pre1"]}"#))
        .await
        .map_err(|e| e.to_string())?;
    let mut reader = ws::Reader::new(false, 1 << 24, false);
    let mut next_id = 0u64;
    loop {
        while let Some((used, msg)) = reader.next(&mut buf).map_err(|e| e.to_string())? {
            buf.drain(..used);
            let Some(Incoming::Data { payload, .. }) = msg else { continue };
            let text = String::from_utf8_lossy(&payload);
            if text.contains(r#""msg":"connected""#) {
                counts.connected.set(counts.connected.get() + 1);
                if calls {
                    next_id += 1;
                    s.write_all(&send(&format!(
                        r#"{{"msg":"method","method":"fetchTasks","params":[],"id":"{next_id}"}}"#
                    )))
                    .await
                    .map_err(|e| e.to_string())?;
                }
            } else if text.contains(r#""msg":"ping""#) {
                counts.pings.set(counts.pings.get() + 1);
                s.write_all(&send(r#"{"msg":"pong"}"#)).await.map_err(|e| e.to_string())?;
            } else if calls && text.contains(r#""msg":"result""#) {
                counts.calls.set(counts.calls.get() + 1);
                if Instant::now() >= until {
                    return Ok(());
                }
                next_id += 1;
                s.write_all(&send(&format!(
                    r#"{{"msg":"method","method":"fetchTasks","params":[],"id":"{next_id}"}}"#
                )))
                .await
                .map_err(|e| e.to_string())?;
            }
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        match tokio::time::timeout(left, s.read(&mut chunk)).await {
            Err(_) => return Ok(()),
            Ok(Ok(0)) | Ok(Err(_)) => return Err("server closed the session".into()),
            Ok(Ok(n)) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: ddp_load idle|calls 127.0.0.1:PORT SESSIONS SECONDS";
    if args.len() != 5 || !matches!(args[1].as_str(), "idle" | "calls") {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let addr: SocketAddr = args[2].parse().unwrap_or_else(|_| {
        eprintln!("{usage}");
        std::process::exit(2)
    });
    if !addr.ip().is_loopback() {
        eprintln!("ddp_load only loads servers on loopback");
        std::process::exit(2);
    }
    let sessions: u64 = args[3].parse().expect("SESSIONS is a number");
    let seconds: u64 = args[4].parse().expect("SECONDS is a number");
    let calls = args[1] == "calls";
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let local = tokio::task::LocalSet::new();
    let counts = Rc::new(Counts::default());
    let begin = Instant::now();
    local.block_on(&rt, async {
        // Open sessions in batches so the accept queue is not overrun.
        let until = begin + Duration::from_secs(seconds) + Duration::from_millis(sessions / 2);
        let mut tasks = Vec::new();
        for i in 0..sessions {
            let c = Rc::clone(&counts);
            tasks.push(tokio::task::spawn_local(async move {
                if session(addr, calls, until, Rc::clone(&c)).await.is_err() {
                    c.failed.set(c.failed.get() + 1);
                }
            }));
            if i % 200 == 199 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        for t in tasks {
            let _ = t.await;
        }
    });
    let elapsed = begin.elapsed().as_secs_f64();
    println!(
        r#"{{"sessions":{sessions},"connected":{},"failed":{},"pings_answered":{},"calls":{},"calls_per_s":{:.0},"elapsed_s":{elapsed:.1}}}"#,
        counts.connected.get(),
        counts.failed.get(),
        counts.pings.get(),
        counts.calls.get(),
        counts.calls.get() as f64 / seconds.max(1) as f64
    );
}
