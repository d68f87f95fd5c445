//! bolide's WebSocket client (the DDP client's framing, permessage-deflate, ping and close
//! handling) as the echo client that Autobahn|Testsuite's fuzzing server drives:
//! `bench/autobahn.sh client` runs it. Asks the server for its case count, runs every case
//! (each a connection that sends every message back), then asks for the reports.
//!
//! Usage: ws_echo ws://127.0.0.1:9001 AGENT

use std::time::Duration;

use bolide::realtime::ddp::wire::echo;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(agent)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: ws_echo ws://HOST:PORT AGENT");
        std::process::exit(2);
    };
    let ep = bolide::plan::endpoint(url).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2);
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
    rt.block_on(async {
        let counted = echo(&ep, "/getCaseCount", false, None, false, Duration::from_secs(10)).await;
        let count: u32 = match counted.map(|o| o.first) {
            Ok(Some(text)) => String::from_utf8_lossy(&text).trim().parse().unwrap_or(0),
            Ok(None) => 0,
            Err(e) => {
                eprintln!("error: cannot ask {url} for its cases: {}", e.detail());
                std::process::exit(1);
            }
        };
        eprintln!("{count} cases");
        for case in 1..=count {
            let path = format!("/runCase?case={case}&agent={agent}");
            match echo(&ep, &path, true, None, true, Duration::from_secs(300)).await {
                Ok(o) => eprintln!("case {case}: {} messages, {}", o.messages, o.ended),
                Err(e) => eprintln!("case {case}: {}", e.detail()),
            }
        }
        let path = format!("/updateReports?agent={agent}");
        if let Err(e) = echo(&ep, &path, false, None, false, Duration::from_secs(120)).await {
            eprintln!("error: reports not updated: {}", e.detail());
            std::process::exit(1);
        }
    });
}
