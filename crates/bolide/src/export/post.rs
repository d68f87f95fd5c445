//! One POST over plain HTTP/1.1 to a receiver (a connection each, `Connection: close`): what the
//! outputs send a second with. Bounded: the time limit per connect, read and write, and at most
//! 64 KiB of answer kept.

use std::io::{Read, Write};
use std::time::Duration;

/// A receiver's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub code: u16,
    /// The body (de-chunked), at most 64 KiB of it.
    pub body: Vec<u8>,
}

const KEEP: usize = 64 * 1024;

/// POSTs `body` to an http:// URL with `headers` (name, value) besides Host, Content-Length,
/// User-Agent and Connection; the answer, or why there is none.
pub fn post(url: &url::Url, headers: &[(&str, &str)], body: &[u8], timeout: Duration) -> Result<Answer, String> {
    if url.scheme() != "http" {
        return Err(format!("{url}: only http:// receivers are written to"));
    }
    let host = url.host_str().ok_or("the URL names no host")?;
    let port = url.port().unwrap_or(80);
    let addr = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))?;
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    s.set_read_timeout(Some(timeout)).ok();
    s.set_write_timeout(Some(timeout)).ok();
    let path = match url.query() {
        Some(q) => format!("{}?{q}", url.path()),
        None => url.path().to_string(),
    };
    let mut head = format!("POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n");
    for (name, value) in headers {
        // A header's value never breaks the request's lines.
        let value: String = value.chars().filter(|c| *c != '\r' && *c != '\n').collect();
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(&format!(
        "User-Agent: bolide/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len()
    ));
    s.write_all(head.as_bytes()).and_then(|()| s.write_all(body)).map_err(|e| format!("sending: {e}"))?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.len() > KEEP || crate::proto::http::parser::is_whole(&answer) {
                    break;
                }
            }
            Err(e) if answer.is_empty() => return Err(format!("reading the answer: {e}")),
            Err(_) => break,
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut res = httparse::Response::new(&mut headers);
    let start = match res.parse(&answer) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => answer.len(),
        Err(_) => return Err("the answer is not HTTP".into()),
    };
    let code = res.code.ok_or_else(|| "an answer without a status".to_string())?;
    let chunked = res.headers.iter().any(|h| {
        h.name.eq_ignore_ascii_case("transfer-encoding")
            && String::from_utf8_lossy(h.value).to_ascii_lowercase().contains("chunked")
    });
    let rest = &answer[start.min(answer.len())..];
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    Ok(Answer { code, body })
}

/// A chunked body's data, as much of it as is whole.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol]).ok().and_then(|l| {
            let hex = l.split(';').next().unwrap_or("").trim();
            usize::from_str_radix(hex, 16).ok()
        });
        let Some(size) = size.filter(|n| *n > 0) else { break };
        let data = &b[eol + 2..];
        let Some(chunk) = data.get(..size) else { break };
        out.extend_from_slice(chunk);
        b = data.get(size + 2..).unwrap_or(&[]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"), b"abcde");
        assert_eq!(dechunk(b"5\r\nab"), b"");
        assert_eq!(dechunk(b"zz\r\n"), b"");
    }
}
