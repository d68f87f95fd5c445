//! Parsing never panics: random and mutated input through every parser of the crate.

use ddp::ws::{self, Opcode};
use rand::{Rng, SeedableRng};

/// Valid inputs to start mutations from.
const SEEDS: &[&str] = &[
    r#"{"msg":"connect","version":"1","support":["1","pre2","pre1"]}"#,
    r#"{"msg":"added","collection":"c","id":"1","fields":{"a":{"$date":5},"b":{"$binary":"AAE="}}}"#,
    r#"{"msg":"changed","collection":"c","id":"1","fields":{"x":{"$escape":{"$type":1}}},"cleared":["y"]}"#,
    r#"{"msg":"result","id":"1","error":{"error":404,"reason":"r"}}"#,
    r#"a["{\"msg\":\"ping\"}","{\"msg\":\"ready\",\"subs\":[\"a\"]}"]"#,
    r#"c[3000,"Go away!"]"#,
    r#"["{\"msg\":\"sub\",\"id\":\"a\",\"name\":\"n\",\"params\":[]}"]"#,
];

fn exercise(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = ddp::Message::parse(&text);
    let _ = ddp::sockjs::parse_server_frame(&text);
    let _ = ddp::sockjs::parse_client_frame(&text);
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
        let _ = ddp::Ejson::from_json(&v);
    }
    for from_client in [true, false] {
        let mut buf = bytes.to_vec();
        let mut reader = ws::Reader::new(from_client, 1 << 16, true);
        let mut pos = 0;
        while let Ok(Some((used, _))) = reader.next(&mut buf[pos..]) {
            pos += used;
        }
    }
    let _ = ws::Deflate::new(1, 9).decompress(bytes, true, 1 << 16);
}

#[test]
fn random_and_mutated_inputs() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x00b0_11de);
    for round in 0..20_000 {
        let mut bytes: Vec<u8> = if round % 2 == 0 {
            SEEDS[round % SEEDS.len()].as_bytes().to_vec()
        } else {
            let mut w = Vec::new();
            let payload: Vec<u8> = (0..rng.random_range(0..300)).map(|_| rng.random()).collect();
            let mask = if rng.random::<bool>() { Some(rng.random()) } else { None };
            ws::encode_frame(&mut w, Opcode::Text, rng.random(), &payload, mask);
            w
        };
        for _ in 0..rng.random_range(0..8) {
            if bytes.is_empty() {
                break;
            }
            let at = rng.random_range(0..bytes.len());
            match rng.random_range(0..3) {
                0 => bytes[at] = rng.random(),
                1 => {
                    bytes.remove(at);
                }
                _ => bytes.insert(at, rng.random()),
            }
        }
        exercise(&bytes);
    }
}
