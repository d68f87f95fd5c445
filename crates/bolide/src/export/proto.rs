//! The protobuf wire format, the little of it the outputs write (and read of answers): keys,
//! varints, zigzag, fixed-width numbers, length-delimited bytes.

pub(crate) fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(crate) fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

pub(crate) fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 0);
    varint(out, v);
}

pub(crate) fn int(out: &mut Vec<u8>, field: u32, v: i64) {
    key(out, field, 0);
    varint(out, v as u64);
}

pub(crate) fn sint32(out: &mut Vec<u8>, field: u32, v: i32) {
    key(out, field, 0);
    varint(out, zigzag(i64::from(v)));
}

pub(crate) fn double(out: &mut Vec<u8>, field: u32, v: f64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, 2);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

pub(crate) fn string(out: &mut Vec<u8>, field: u32, s: &str) {
    bytes(out, field, s.as_bytes());
}

pub(crate) fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

pub(crate) fn sfixed64(out: &mut Vec<u8>, field: u32, v: i64) {
    key(out, field, 1);
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads a varint at `at`, moving past it.
pub(crate) fn read_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at)?;
        *at += 1;
        v |= u64::from(byte & 0x7F) << shift;
        if byte < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The fields of a message, each as (field, wire type, varint value or bytes); None when the
/// bytes are not protobuf.
pub(crate) fn fields(b: &[u8]) -> Option<Vec<(u32, u64, &[u8])>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < b.len() {
        let k = read_varint(b, &mut at)?;
        let (field, wire) = (u32::try_from(k >> 3).ok()?, k & 7);
        match wire {
            0 => out.push((field, read_varint(b, &mut at)?, &b[at..at])),
            1 | 5 => {
                let n = if wire == 1 { 8 } else { 4 };
                let raw = b.get(at..at + n)?;
                at += n;
                out.push((field, 0, raw));
            }
            2 => {
                let n = usize::try_from(read_varint(b, &mut at)?).ok()?;
                let raw = b.get(at..at.checked_add(n)?)?;
                at += n;
                out.push((field, 0, raw));
            }
            _ => return None,
        }
    }
    Some(out)
}
