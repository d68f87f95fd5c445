//! One POST over HTTP/1.1 to a receiver, in clear or over TLS (a connection each, `Connection:
//! close`): what the outputs send a second with. Bounded: the time limit per connect, read and
//! write, and at most 64 KiB of answer kept.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::problem::Problem;

/// Why a POST got no answer, and whether trying again may help (a refused or reset connection
/// may; a certificate the receiver's name does not match will not).
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub why: String,
    pub retry: bool,
}

impl From<String> for Failure {
    fn from(why: String) -> Failure {
        Failure { why, retry: true }
    }
}

impl From<&str> for Failure {
    fn from(why: &str) -> Failure {
        Failure { why: why.to_string(), retry: true }
    }
}

/// A TLS client for https:// receivers: the Mozilla roots, and the certificates of the PEM file
/// `ca_file` when given (a private CA's); an unreadable file or one without a certificate is said.
pub fn tls_config(ca_file: Option<&std::path::Path>) -> Result<Arc<rustls::ClientConfig>, Problem> {
    let mut roots = rustls::RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() };
    if let Some(path) = ca_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let certs = pem_certificates(&text);
        if certs.is_empty() {
            return Err(format!("{}: no PEM certificate in it", path.display()).into());
        }
        for c in certs {
            roots.add(c).map_err(|e| format!("{}: {e}", path.display()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The `CERTIFICATE` blocks of a PEM text.
fn pem_certificates(text: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use base64::Engine as _;
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(begin) = rest.find("-----BEGIN CERTIFICATE-----") {
        let body = &rest[begin + "-----BEGIN CERTIFICATE-----".len()..];
        let Some(end) = body.find("-----END CERTIFICATE-----") else { break };
        let b64: String = body[..end].chars().filter(|c| !c.is_whitespace()).collect();
        if let Ok(der) = base64::engine::general_purpose::STANDARD.decode(b64) {
            out.push(rustls::pki_types::CertificateDer::from(der));
        }
        rest = &body[end..];
    }
    out
}

/// A receiver's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub code: u16,
    /// The body (de-chunked), at most 64 KiB of it.
    pub body: Vec<u8>,
}

const KEEP: usize = 64 * 1024;

/// POSTs `body` to an http:// URL (or an https:// one with `tls`) with `headers` (name, value)
/// besides Host, Content-Length, User-Agent and Connection; the answer, or why there is none.
pub fn post(
    url: &url::Url,
    tls: Option<&Arc<rustls::ClientConfig>>,
    headers: &[(&str, &str)],
    body: &[u8],
    timeout: Duration,
) -> Result<Answer, Failure> {
    let tls = match (url.scheme(), tls) {
        ("http", _) => None,
        ("https", Some(t)) => Some(t),
        ("https", None) => return Err(Failure { why: format!("{url}: no TLS client for it"), retry: false }),
        _ => return Err(Failure { why: format!("{url}: only http:// and https:// receivers"), retry: false }),
    };
    let host = url.host_str().ok_or("the URL names no host")?;
    let port = url.port_or_known_default().unwrap_or(80);
    let addr = url
        .socket_addrs(|| None)
        .map_err(|e| format!("{host}:{port}: {e}"))?
        .into_iter()
        .next()
        .ok_or_else(|| format!("{host}:{port}: no address"))?;
    let tcp = std::net::TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("{addr}: {e}"))?;
    tcp.set_read_timeout(Some(timeout)).ok();
    tcp.set_write_timeout(Some(timeout)).ok();
    match tls {
        None => exchange(tcp, url, host, port, headers, body),
        Some(config) => {
            // The URL's host as the certificate's name (an IP address for an IP).
            let name = rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
                .map_err(|e| Failure { why: format!("{host}: {e}"), retry: false })?;
            let conn = rustls::ClientConnection::new(Arc::clone(config), name)
                .map_err(|e| Failure { why: format!("TLS: {e}"), retry: false })?;
            let mut stream = rustls::StreamOwned::new(conn, tcp);
            // The handshake first, so that a certificate refused is told from a network failure.
            while stream.conn.is_handshaking() {
                if let Err(e) = stream.conn.complete_io(&mut stream.sock) {
                    let refused = e.get_ref().is_some_and(|inner| inner.is::<rustls::Error>());
                    return Err(Failure { why: format!("TLS handshake: {e}"), retry: !refused });
                }
            }
            exchange(stream, url, host, port, headers, body)
        }
    }
}

/// Writes the request on a connection and reads the answer.
fn exchange(
    mut s: impl Read + Write,
    url: &url::Url,
    host: &str,
    port: u16,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<Answer, Failure> {
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
            Err(e) if answer.is_empty() => return Err(format!("reading the answer: {e}").into()),
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
    let code = res.code.ok_or("an answer without a status")?;
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
    fn pem_certificates_are_read_and_garbage_is_not() {
        let text = "junk\n-----BEGIN CERTIFICATE-----\nAQID\nBA==\n-----END CERTIFICATE-----\n\
                    -----BEGIN CERTIFICATE-----\nBQY=\n-----END CERTIFICATE-----\n";
        let certs = pem_certificates(text);
        assert_eq!(certs.iter().map(|c| c.as_ref().to_vec()).collect::<Vec<_>>(), vec![vec![1, 2, 3, 4], vec![5, 6]]);
        assert!(pem_certificates("no certificate").is_empty());
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "nothing").unwrap();
        assert!(tls_config(Some(&empty)).unwrap_err().to_string().contains("no PEM certificate"));
        assert!(tls_config(Some(&dir.path().join("absent.pem"))).is_err());
        assert!(tls_config(None).is_ok());
    }

    #[test]
    fn chunked_bodies_are_joined() {
        assert_eq!(dechunk(b"3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"), b"abcde");
        assert_eq!(dechunk(b"5\r\nab"), b"");
        assert_eq!(dechunk(b"zz\r\n"), b"");
    }
}
