//! WebSocket (RFC 6455) framing and permessage-deflate (RFC 7692), without I/O: the caller owns
//! the socket and the buffers, this module checks that a frame is complete before it parses it,
//! and never allocates more than the message limit.
//!
//! Compression state: with `no_context_takeover` on both sides (what Meteor 3.1.1 asks for, and
//! what bolide's reference server answers), every message is compressed and decompressed on its
//! own, so one [`Deflate`] per thread serves every connection and a session holds no zlib state at
//! all. Only a peer that keeps its context needs a `Deflate` of its own per connection.

use base64::Engine as _;
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use sha1::{Digest, Sha1};

const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key`.
pub fn accept_key(key: &str) -> String {
    let mut h = Sha1::new();
    h.update(key.trim().as_bytes());
    h.update(GUID.as_bytes());
    base64::engine::general_purpose::STANDARD.encode(h.finalize())
}

/// A fresh `Sec-WebSocket-Key`.
pub fn client_key() -> String {
    let bytes: [u8; 16] = rand::random();
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opcode {
    Continuation,
    Text,
    Binary,
    Close,
    Ping,
    Pong,
}

impl Opcode {
    fn from_bits(b: u8) -> Option<Opcode> {
        Some(match b {
            0 => Opcode::Continuation,
            1 => Opcode::Text,
            2 => Opcode::Binary,
            8 => Opcode::Close,
            9 => Opcode::Ping,
            10 => Opcode::Pong,
            _ => return None,
        })
    }

    fn bits(self) -> u8 {
        match self {
            Opcode::Continuation => 0,
            Opcode::Text => 1,
            Opcode::Binary => 2,
            Opcode::Close => 8,
            Opcode::Ping => 9,
            Opcode::Pong => 10,
        }
    }

    fn is_control(self) -> bool {
        matches!(self, Opcode::Close | Opcode::Ping | Opcode::Pong)
    }
}

/// A protocol violation; the connection should be closed with `close_code`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WsError {
    pub close_code: u16,
    pub reason: String,
}

impl WsError {
    fn protocol(reason: impl Into<String>) -> WsError {
        WsError { close_code: 1002, reason: reason.into() }
    }
}

impl std::fmt::Display for WsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WebSocket error {}: {}", self.close_code, self.reason)
    }
}

impl std::error::Error for WsError {}

/// A whole message (fragments joined, still compressed if `compressed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    Data { opcode: Opcode, compressed: bool, payload: Vec<u8> },
    Ping(Vec<u8>),
    Pong(Vec<u8>),
    Close { code: Option<u16>, reason: String },
}

/// Joins frames into messages for one connection.
#[derive(Debug)]
pub struct Reader {
    /// Frames from a client must be masked, frames from a server must not.
    from_client: bool,
    /// Largest message (and frame) accepted, in bytes.
    max_message: usize,
    /// Whether permessage-deflate was negotiated (RSV1 allowed on first frames).
    deflate: bool,
    partial: Option<(Opcode, bool, Vec<u8>)>,
}

impl Reader {
    pub fn new(from_client: bool, max_message: usize, deflate: bool) -> Reader {
        Reader { from_client, max_message, deflate, partial: None }
    }

    /// Takes one frame from the front of `buf` if it is complete. Returns the bytes it used and the
    /// message it completed, if any; `Ok(None)` when more bytes are needed.
    pub fn next(&mut self, buf: &mut [u8]) -> Result<Option<(usize, Option<Incoming>)>, WsError> {
        if buf.len() < 2 {
            return Ok(None);
        }
        let (b0, b1) = (buf[0], buf[1]);
        let fin = b0 & 0x80 != 0;
        let rsv1 = b0 & 0x40 != 0;
        if b0 & 0x30 != 0 {
            return Err(WsError::protocol("reserved bits set"));
        }
        let opcode = Opcode::from_bits(b0 & 0x0f).ok_or_else(|| WsError::protocol("unknown opcode"))?;
        let masked = b1 & 0x80 != 0;
        if masked != self.from_client {
            return Err(WsError::protocol(if self.from_client {
                "client frame not masked"
            } else {
                "server frame masked"
            }));
        }
        let (len, mut at) = match b1 & 0x7f {
            126 if buf.len() < 4 => return Ok(None),
            126 => (u64::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
            127 if buf.len() < 10 => return Ok(None),
            127 => (u64::from_be_bytes(buf[2..10].try_into().expect("8 bytes")), 10),
            n => (u64::from(n), 2),
        };
        if len >> 63 != 0 {
            return Err(WsError::protocol("64-bit length with its top bit set"));
        }
        if opcode.is_control() && (len > 125 || !fin) {
            return Err(WsError::protocol("control frame too long or fragmented"));
        }
        let so_far = self.partial.as_ref().map_or(0, |p| p.2.len()) as u64;
        if len.saturating_add(so_far) > self.max_message as u64 {
            return Err(WsError {
                close_code: 1009,
                reason: format!("message larger than {} bytes", self.max_message),
            });
        }
        let mask = if masked {
            if buf.len() < at + 4 {
                return Ok(None);
            }
            at += 4;
            Some([buf[at - 4], buf[at - 3], buf[at - 2], buf[at - 1]])
        } else {
            None
        };
        let end = at + len as usize;
        if buf.len() < end {
            return Ok(None);
        }
        let payload = &mut buf[at..end];
        if let Some(m) = mask {
            for (i, b) in payload.iter_mut().enumerate() {
                *b ^= m[i & 3];
            }
        }
        let payload = &*payload;
        let message = match opcode {
            Opcode::Ping => Some(Incoming::Ping(payload.to_vec())),
            Opcode::Pong => Some(Incoming::Pong(payload.to_vec())),
            Opcode::Close => {
                let (code, reason) = match payload {
                    [] => (None, String::new()),
                    [_] => return Err(WsError::protocol("close frame of one byte")),
                    [a, b, rest @ ..] => {
                        let code = u16::from_be_bytes([*a, *b]);
                        if !close_code_allowed(code) {
                            return Err(WsError::protocol(format!("close code {code} may not be sent")));
                        }
                        let Ok(reason) = std::str::from_utf8(rest) else {
                            return Err(WsError { close_code: 1007, reason: "close reason is not UTF-8".into() });
                        };
                        (Some(code), reason.to_string())
                    }
                };
                Some(Incoming::Close { code, reason })
            }
            Opcode::Text | Opcode::Binary => {
                if self.partial.is_some() {
                    return Err(WsError::protocol("new message inside a fragmented one"));
                }
                if rsv1 && !self.deflate {
                    return Err(WsError::protocol("compressed frame without permessage-deflate"));
                }
                if fin {
                    Some(Incoming::Data { opcode, compressed: rsv1, payload: payload.to_vec() })
                } else {
                    self.partial = Some((opcode, rsv1, payload.to_vec()));
                    None
                }
            }
            Opcode::Continuation => {
                if rsv1 {
                    return Err(WsError::protocol("RSV1 on a continuation frame"));
                }
                let Some((op, compressed, mut data)) = self.partial.take() else {
                    return Err(WsError::protocol("continuation without a message"));
                };
                data.extend_from_slice(payload);
                if fin {
                    Some(Incoming::Data { opcode: op, compressed, payload: data })
                } else {
                    self.partial = Some((op, compressed, data));
                    None
                }
            }
        };
        Ok(Some((end, message)))
    }
}

/// Whether a peer may send this close code (RFC 6455 section 7.4): the defined codes except
/// 1004-1006 and 1015 (reserved, or meant for reporting only), IANA's 1012-1014, and the
/// application ranges 3000-4999.
pub fn close_code_allowed(code: u16) -> bool {
    matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999)
}

/// Appends one frame to `out`; `mask` is required on frames a client sends.
pub fn encode_frame(out: &mut Vec<u8>, opcode: Opcode, compressed: bool, payload: &[u8], mask: Option<[u8; 4]>) {
    out.push(0x80 | if compressed { 0x40 } else { 0 } | opcode.bits());
    let mask_bit = if mask.is_some() { 0x80 } else { 0 };
    match payload.len() {
        n if n < 126 => out.push(mask_bit | n as u8),
        n if n <= 0xffff => {
            out.push(mask_bit | 126);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            out.push(mask_bit | 127);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    match mask {
        Some(m) => {
            out.extend_from_slice(&m);
            out.extend(payload.iter().enumerate().map(|(i, b)| b ^ m[i & 3]));
        }
        None => out.extend_from_slice(payload),
    }
}

/// A close frame's payload: code and reason.
pub fn close_payload(code: u16, reason: &str) -> Vec<u8> {
    let mut p = code.to_be_bytes().to_vec();
    p.extend_from_slice(&reason.as_bytes()[..reason.len().min(123)]);
    p
}

/// What permessage-deflate settings apply on one connection, from one side's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeflateParams {
    /// This side resets its compressor after every message.
    pub own_no_context_takeover: bool,
    /// The peer resets its compressor after every message (so we may reset our decompressor).
    pub peer_no_context_takeover: bool,
    /// The largest LZ77 window this side may compress with (9-15; the peer's decompressor may
    /// hold no more). zlib's smallest, 9, also serves a request for 8: its matches never reach
    /// further back than 250 bytes.
    pub own_max_window_bits: u8,
}

/// An extension's `key[=value]` parameters.
pub type ExtensionParams = Vec<(String, Option<String>)>;

/// The extensions of an offer or response: each name with its parameters.
pub fn parse_extensions(header: &str) -> Vec<(String, ExtensionParams)> {
    header
        .split(',')
        .filter_map(|ext| {
            let mut parts = ext.split(';').map(str::trim);
            let name = parts.next().filter(|n| !n.is_empty())?.to_ascii_lowercase();
            let params = parts
                .filter(|p| !p.is_empty())
                .map(|p| match p.split_once('=') {
                    Some((k, v)) => (k.trim().to_ascii_lowercase(), Some(v.trim().trim_matches('"').to_string())),
                    None => (p.to_ascii_lowercase(), None),
                })
                .collect();
            Some((name, params))
        })
        .collect()
}

/// A server's answer to a client's `Sec-WebSocket-Extensions`: the response header value, if it
/// accepts permessage-deflate. It always asks for no context takeover on both sides, like Meteor
/// 3.1.1, so neither side keeps compression state between messages.
pub fn server_accept_deflate(offer_header: &str) -> Option<(String, DeflateParams)> {
    let offer = parse_extensions(offer_header).into_iter().find(|(n, _)| n == "permessage-deflate")?;
    for (k, v) in &offer.1 {
        let known = matches!(
            k.as_str(),
            "server_no_context_takeover"
                | "client_no_context_takeover"
                | "server_max_window_bits"
                | "client_max_window_bits"
        );
        let valid_bits = v.as_deref().is_none_or(|b| b.parse::<u8>().is_ok_and(|b| (8..=15).contains(&b)));
        if !known || !valid_bits {
            return None;
        }
    }
    let header = "permessage-deflate; server_no_context_takeover; client_no_context_takeover".to_string();
    // The server compresses with the smallest window (see refserver's session), so any
    // server_max_window_bits the client asks for holds.
    Some((
        header,
        DeflateParams { own_no_context_takeover: true, peer_no_context_takeover: true, own_max_window_bits: 9 },
    ))
}

/// The browser's offer.
pub const CLIENT_OFFER: &str = "permessage-deflate; client_max_window_bits";

/// A client reads the server's `Sec-WebSocket-Extensions`: `Ok(None)` for no compression.
pub fn client_accept_deflate(response_header: Option<&str>) -> Result<Option<DeflateParams>, String> {
    let Some(header) = response_header else { return Ok(None) };
    let exts = parse_extensions(header);
    let Some((_, params)) = exts.iter().find(|(n, _)| n == "permessage-deflate") else {
        return match exts.first() {
            Some((n, _)) => Err(format!("server chose extension {n:?}, which was not offered")),
            None => Ok(None),
        };
    };
    let has = |k: &str| params.iter().any(|(p, _)| p == k);
    // The window the server lets us compress with (RFC 7692 section 7.1.2.2).
    let own_max_window_bits = match params.iter().find(|(p, _)| p == "client_max_window_bits") {
        None => 15,
        Some((_, Some(v))) => match v.parse::<u8>() {
            Ok(bits @ 8..=15) => bits.max(9),
            _ => return Err(format!("server asked for client_max_window_bits={v}, not 8-15")),
        },
        Some((_, None)) => return Err("server answered client_max_window_bits without a value".into()),
    };
    // We never use context takeover for what we send (always allowed), whatever the server says.
    Ok(Some(DeflateParams {
        own_no_context_takeover: true,
        peer_no_context_takeover: has("server_no_context_takeover"),
        own_max_window_bits,
    }))
}

/// Deflate for permessage-deflate: raw DEFLATE, each message ending in an empty stored block whose
/// four bytes `00 00 ff ff` are left off on the wire.
pub struct Deflate {
    compress: Compress,
    decompress: Decompress,
    /// Small messages with no context as literals ([`Deflate::writing_literals`]).
    literals: bool,
}

const TAIL: [u8; 4] = [0, 0, 0xff, 0xff];

/// A client's messages up to this size, compressed with no context, are one block of literals in
/// DEFLATE's fixed Huffman code, written here: resetting zlib's compressor clears its 128 KiB hash table,
/// which cost more than the message (a DDP method call: memset was 22% of the generator's
/// samples). A small JSON message has few repeats to find; it stays real DEFLATE, which the
/// peer decodes as it decodes a browser's.
const LITERALS_MAX: usize = 512;

/// `data` as one non-final fixed-Huffman block of literals and the empty stored block of a sync
/// flush, less that block's `00 00 ff ff` (RFC 1951 §3.2.6; RFC 7692 §7.2.1).
fn fixed_literals(data: &[u8], out: &mut Vec<u8>) {
    /// Bits waiting for a whole byte, least significant first.
    struct Bits<'a> {
        out: &'a mut Vec<u8>,
        acc: u64,
        n: u32,
    }
    impl Bits<'_> {
        fn put(&mut self, value: u32, len: u32) {
            self.acc |= u64::from(value) << self.n;
            self.n += len;
            while self.n >= 8 {
                self.out.push(self.acc as u8);
                self.acc >>= 8;
                self.n -= 8;
            }
        }
    }
    // Huffman codes go most significant bit first into a stream read least significant first.
    let code = |bits: u32, len: u32| bits.reverse_bits() >> (32 - len);
    out.reserve(data.len() + data.len() / 8 + 3);
    let mut w = Bits { out, acc: 0, n: 0 };
    // BFINAL 0, BTYPE 01 (fixed Huffman).
    w.put(0b010, 3);
    for &b in data {
        let (bits, len) = if b < 144 { (0x30 + u32::from(b), 8) } else { (0x190 + u32::from(b) - 144, 9) };
        w.put(code(bits, len), len);
    }
    // End of block (256: seven zero bits), then the stored block's header (BFINAL 0, BTYPE 00),
    // padded to a byte; its LEN and NLEN are the tail the wire leaves off.
    w.put(0, 7);
    w.put(0, 3);
    if w.n > 0 {
        w.put(0, 8 - w.n);
    }
}

impl Deflate {
    /// `level` 0-9 (Meteor 3.1.1: 1, fastest); `window_bits` 9-15 for what we compress (Meteor:
    /// the smallest); what we decompress may use any window.
    pub fn new(level: u32, window_bits: u8) -> Deflate {
        Deflate {
            compress: Compress::new_with_window_bits(Compression::new(level), false, window_bits.clamp(9, 15)),
            decompress: Decompress::new_with_window_bits(false, 15),
            literals: false,
        }
    }

    /// A client's compressor: a message of [`LITERALS_MAX`] bytes or less, compressed with no
    /// context, is one block of literals in the fixed Huffman code, written without zlib. A
    /// server's stays zlib's throughout, as Meteor's does (its CPU is what a benchmark measures).
    pub fn writing_literals(mut self) -> Deflate {
        self.literals = true;
        self
    }

    /// Compresses one message; `reset` for no context takeover.
    pub fn compress(&mut self, data: &[u8], reset: bool, out: &mut Vec<u8>) {
        if self.literals && reset && data.len() <= LITERALS_MAX {
            fixed_literals(data, out);
            return;
        }
        if reset {
            self.compress.reset();
        }
        let start = out.len();
        let mut consumed = 0;
        loop {
            out.reserve((data.len() - consumed) / 2 + 64);
            let before = self.compress.total_in();
            if self.compress.compress_vec(&data[consumed..], out, FlushCompress::Sync).is_err() {
                break;
            }
            consumed += (self.compress.total_in() - before) as usize;
            // zlib stops early only when it runs out of room; spare room left means it is done.
            if consumed == data.len() && out.len() < out.capacity() {
                break;
            }
        }
        if out[start..].ends_with(&TAIL) {
            out.truncate(out.len() - 4);
        }
    }

    /// Decompresses one message of at most `max` bytes; `reset` when the peer uses no context
    /// takeover.
    pub fn decompress(&mut self, data: &[u8], reset: bool, max: usize) -> Result<Vec<u8>, WsError> {
        if reset {
            self.decompress.reset(false);
        }
        let mut out = Vec::with_capacity((data.len() * 3).min(max).max(64));
        for chunk in [data, &TAIL[..]] {
            let mut input = chunk;
            while !input.is_empty() {
                if out.len() == out.capacity() {
                    if out.len() >= max {
                        return Err(WsError { close_code: 1009, reason: format!("message inflates past {max} bytes") });
                    }
                    out.reserve((out.len()).min(max - out.len()).max(64));
                }
                let before = self.decompress.total_in();
                let status = self
                    .decompress
                    .decompress_vec(input, &mut out, FlushDecompress::Sync)
                    .map_err(|e| WsError { close_code: 1007, reason: format!("bad compressed data: {e}") })?;
                input = &input[(self.decompress.total_in() - before) as usize..];
                if status == Status::StreamEnd {
                    break;
                }
            }
        }
        if out.len() > max {
            return Err(WsError { close_code: 1009, reason: format!("message inflates past {max} bytes") });
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_messages_are_fixed_huffman_literals_that_inflate_back() {
        let mut d = Deflate::new(1, 15).writing_literals();
        let every: Vec<u8> = (0..=255u8).collect();
        let json = br#"{"msg":"method","id":"12","method":"fetchTasks","params":[]}"#.to_vec();
        for data in [Vec::new(), b"a".to_vec(), json, every, vec![b'x'; LITERALS_MAX]] {
            let mut out = Vec::new();
            d.compress(&data, true, &mut out);
            // A fixed block: BTYPE 01 in the first byte's bits 1-2.
            assert_eq!(out[0] & 0b110, 0b010, "{data:?}");
            assert_eq!(d.decompress(&out, true, 1 << 20).unwrap(), data);
            // zlib reads it as well (a fresh inflater, the tail put back).
            let mut z = Decompress::new_with_window_bits(false, 15);
            let mut back = Vec::with_capacity(data.len() + 64);
            let whole = [&out[..], &TAIL[..]].concat();
            z.decompress_vec(&whole, &mut back, FlushDecompress::Sync).unwrap();
            assert_eq!(back, data);
        }
        // A server's compressor finds the repeats of a small message too.
        let mut zlib = Vec::new();
        Deflate::new(1, 15).compress(&[b'z'; 100], true, &mut zlib);
        assert!(zlib.len() < 20, "{}", zlib.len());
        // Larger messages, or a compressor that keeps its context, go through zlib.
        let big = vec![b'y'; LITERALS_MAX + 1];
        let mut out = Vec::new();
        d.compress(&big, true, &mut out);
        assert!(out.len() < 50, "repeats found: {}", out.len());
        assert_eq!(d.decompress(&out, true, 1 << 20).unwrap(), big);
    }

    #[test]
    fn accept_key_of_rfc_6455_example() {
        assert_eq!(accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(client_key().len(), 24);
    }

    fn read_all(reader: &mut Reader, mut bytes: Vec<u8>) -> Result<Vec<Incoming>, WsError> {
        let mut out = Vec::new();
        let mut pos = 0;
        while let Some((used, msg)) = reader.next(&mut bytes[pos..])? {
            pos += used;
            out.extend(msg);
        }
        assert_eq!(pos, bytes.len(), "all bytes used");
        Ok(out)
    }

    #[test]
    fn frames_of_every_length_and_split_point() {
        for len in [0usize, 1, 125, 126, 127, 65_535, 65_536, 70_000] {
            let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            for mask in [None, Some([1, 2, 3, 4])] {
                let mut wire = Vec::new();
                encode_frame(&mut wire, Opcode::Binary, false, &payload, mask);
                // Complete-before-parse: every strict prefix needs more bytes.
                let mut reader = Reader::new(mask.is_some(), 1 << 20, false);
                for cut in [0, 1, 2, 3, 9, wire.len() - 1] {
                    if cut < wire.len() {
                        assert_eq!(reader.next(&mut wire.clone()[..cut]).unwrap(), None, "len {len} cut {cut}");
                    }
                }
                let got = read_all(&mut reader, wire).unwrap();
                assert_eq!(
                    got,
                    vec![Incoming::Data { opcode: Opcode::Binary, compressed: false, payload: payload.clone() }]
                );
            }
        }
    }

    #[test]
    fn fragments_and_interleaved_control_frames() {
        let mut wire = vec![0x01, 0x03, b'a', b'b', b'c']; // text, not final
        encode_frame(&mut wire, Opcode::Ping, false, b"hi", None);
        wire.extend_from_slice(&[0x80, 0x02, b'd', b'e']); // final continuation
        encode_frame(&mut wire, Opcode::Close, false, &close_payload(1000, "bye"), None);
        let got = read_all(&mut Reader::new(false, 100, false), wire).unwrap();
        assert_eq!(
            got,
            vec![
                Incoming::Ping(b"hi".to_vec()),
                Incoming::Data { opcode: Opcode::Text, compressed: false, payload: b"abcde".to_vec() },
                Incoming::Close { code: Some(1000), reason: "bye".into() },
            ]
        );
    }

    #[test]
    fn protocol_violations() {
        // Each row: bytes from a client (masked unless the row is about masking), close code.
        let rows: Vec<(Vec<u8>, u16)> = vec![
            (vec![0x81, 0x01, b'x'], 1002),                         // unmasked client frame
            (vec![0xF1, 0x80, 0, 0, 0, 0], 1002),                   // reserved bits
            (vec![0x83, 0x80, 0, 0, 0, 0], 1002),                   // opcode 3
            (vec![0x89, 0xFE, 0x00, 0x7E], 1002),                   // ping of 126 bytes
            (vec![0x80, 0x80, 0, 0, 0, 0], 1002),                   // continuation without start
            (vec![0xC1, 0x80, 0, 0, 0, 0], 1002),                   // compressed without the extension
            (vec![0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0x10, 0], 1009),    // 1 MiB frame over a 1 KiB limit
            (vec![0x82, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 0], 1002),    // 64-bit length, top bit set
            (vec![0x88, 0x82, 0, 0, 0, 0, 0x03, 0xED], 1002),       // close code 1005 on the wire
            (vec![0x88, 0x82, 0, 0, 0, 0, 0x03, 0xE7], 1002),       // close code 999
            (vec![0x88, 0x82, 0, 0, 0, 0, 0x07, 0xD0], 1002),       // close code 2000
            (vec![0x88, 0x83, 0, 0, 0, 0, 0x03, 0xE8, 0xFF], 1007), // close reason not UTF-8
        ];
        for (i, (mut bytes, code)) in rows.into_iter().enumerate() {
            let err = Reader::new(true, 1024, false).next(&mut bytes).unwrap_err();
            assert_eq!(err.close_code, code, "row {i}: {err}");
        }
    }

    #[test]
    fn huge_continuation_after_a_fragment_is_refused_not_wrapped() {
        // Found by fuzzing: a length near 2^63 after a fragment overflowed the size check.
        let mut r = Reader::new(false, 1024, false);
        let mut first = vec![0x01, 0x01, b'a'];
        assert!(matches!(r.next(&mut first), Ok(Some((3, None)))));
        let mut next = vec![0x80, 0x7F, 0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF];
        assert_eq!(r.next(&mut next).unwrap_err().close_code, 1009);
    }

    #[test]
    fn close_codes_peers_may_send() {
        let allowed: Vec<u16> = (0..=5000).filter(|&c| close_code_allowed(c)).collect();
        assert_eq!(allowed.len(), 4 + 8 + 2000);
        for c in [0, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000] {
            assert!(!close_code_allowed(c), "{c}");
        }
    }

    #[test]
    fn deflate_round_trip_without_context_takeover() {
        let mut a = Deflate::new(1, 9);
        let mut b = Deflate::new(1, 15);
        let message =
            br#"{"msg":"added","collection":"taskCollection","id":"x","fields":{"description":"New Task 1"}}"#
                .repeat(30);
        for _ in 0..3 {
            let mut wire = Vec::new();
            a.compress(&message, true, &mut wire);
            assert!(wire.len() < message.len() / 3, "{} -> {}", message.len(), wire.len());
            assert!(!wire.ends_with(&TAIL));
            assert_eq!(b.decompress(&wire, true, 1 << 20).unwrap(), message);
        }
        // A bomb: inflating past the limit is refused.
        let zeros = vec![0u8; 200_000];
        let mut wire = Vec::new();
        a.compress(&zeros, true, &mut wire);
        assert_eq!(b.decompress(&wire, true, 100_000).unwrap_err().close_code, 1009);
        assert_eq!(b.decompress(b"\xff\xff\xff", true, 100).unwrap_err().close_code, 1007);
    }

    #[test]
    fn deflate_with_context_takeover_needs_the_same_decompressor() {
        let mut tx = Deflate::new(6, 15);
        let mut rx = Deflate::new(6, 15);
        let m = b"the same words again and again and again".to_vec();
        for _ in 0..3 {
            let mut wire = Vec::new();
            tx.compress(&m, false, &mut wire);
            assert_eq!(rx.decompress(&wire, false, 1000).unwrap(), m);
        }
    }

    #[test]
    fn extension_negotiation() {
        // What Chrome sends; the server answers with no context takeover both ways.
        let (header, params) = server_accept_deflate("permessage-deflate; client_max_window_bits").unwrap();
        assert_eq!(header, "permessage-deflate; server_no_context_takeover; client_no_context_takeover");
        assert!(params.own_no_context_takeover && params.peer_no_context_takeover);
        assert!(server_accept_deflate("x-webkit-deflate-frame").is_none());
        assert!(server_accept_deflate("permessage-deflate; server_max_window_bits=99").is_none());
        assert!(server_accept_deflate("permessage-deflate; bogus").is_none());
        let p = client_accept_deflate(Some("permessage-deflate; server_no_context_takeover")).unwrap().unwrap();
        assert!(p.peer_no_context_takeover);
        let p = client_accept_deflate(Some("permessage-deflate")).unwrap().unwrap();
        assert!(!p.peer_no_context_takeover, "a server that keeps its context needs our own inflater");
        assert_eq!(client_accept_deflate(None).unwrap(), None);
        assert!(client_accept_deflate(Some("x-other")).is_err());
        // The window the server lets the client compress with.
        let bits = |h: &str| client_accept_deflate(Some(h)).map(|p| p.unwrap().own_max_window_bits);
        assert_eq!(bits("permessage-deflate"), Ok(15));
        assert_eq!(bits("permessage-deflate; client_max_window_bits=12"), Ok(12));
        assert_eq!(bits("permessage-deflate; client_max_window_bits=8"), Ok(9), "zlib's 9 never reaches past 250");
        assert!(bits("permessage-deflate; client_max_window_bits=16").unwrap_err().contains("not 8-15"));
        assert!(bits("permessage-deflate; client_max_window_bits").is_err());
    }

    #[test]
    fn a_small_window_is_kept_to() {
        // The same 2 KB twice: the second copy is a match 2 KB back, past a 9-bit (512-byte)
        // window. With it the copy costs a few bytes; without, as much as the first.
        let block: Vec<u8> =
            (0..2048u32).map(|i| (i.wrapping_mul(2654435761).rotate_left(i % 29) >> 7) as u8).collect();
        let message = [block.clone(), block].concat();
        let (mut wide, mut small) = (Vec::new(), Vec::new());
        Deflate::new(1, 15).compress(&message, true, &mut wide);
        Deflate::new(1, 9).compress(&message, true, &mut small);
        assert!(small.len() > wide.len() * 3 / 2, "9-bit window {} bytes, 15-bit {}", small.len(), wide.len());
        let mut rx = Deflate::new(1, 15);
        assert_eq!(rx.decompress(&small, true, 1 << 20).unwrap(), message);
        assert_eq!(rx.decompress(&wide, true, 1 << 20).unwrap(), message);
    }
}
