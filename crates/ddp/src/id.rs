//! Meteor's ids: `Random.id()` (17 characters of an unmistakable 55-character alphabet) for
//! sessions, subscriptions and documents; `Random.secret()` (43 characters) for login tokens;
//! `Random.hexString(20)` for method random seeds; method ids counting up per connection.

use rand::Rng;

/// The alphabet of `Random.id()`: no 0/O, 1/l/I look-alikes.
pub const UNMISTAKABLE: &[u8; 55] = b"23456789ABCDEFGHJKLMNPQRSTWXYZabcdefghijkmnopqrstuvwxyz";
/// The alphabet of `Random.secret()`.
const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn choose(alphabet: &[u8], len: usize) -> String {
    let mut rng = rand::rng();
    (0..len).map(|_| alphabet[rng.random_range(0..alphabet.len())] as char).collect()
}

/// A fresh `Random.id()`: 17 characters, about 96 bits.
pub fn random_id() -> String {
    choose(UNMISTAKABLE, 17)
}

/// A fresh `Random.secret()`: 43 characters, 256 bits.
pub fn random_secret() -> String {
    choose(BASE64_URL, 43)
}

/// `Random.hexString(n)`.
pub fn hex_string(n: usize) -> String {
    choose(b"0123456789abcdef", n)
}

/// Whether `s` has the shape of a `Random.id()`.
pub fn is_random_id(s: &str) -> bool {
    s.len() == 17 && s.bytes().all(|b| UNMISTAKABLE.contains(&b))
}

/// Method ids of one connection: "1", "2", ... never reset, not even on reconnect.
#[derive(Debug, Default, Clone)]
pub struct MethodIds {
    last: u64,
}

impl MethodIds {
    pub fn next_id(&mut self) -> String {
        self.last += 1;
        self.last.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        for _ in 0..200 {
            let id = random_id();
            assert!(is_random_id(&id), "{id}");
            let secret = random_secret();
            assert_eq!(secret.len(), 43);
            assert!(secret.bytes().all(|b| BASE64_URL.contains(&b)));
            let seed = hex_string(20);
            assert_eq!(seed.len(), 20);
            assert!(seed.bytes().all(|b| b.is_ascii_hexdigit()));
        }
        assert_ne!(random_id(), random_id());
        assert!(!is_random_id("0OIl1xxxxxxxxxxxx"));
        assert!(!is_random_id("short"));
    }

    #[test]
    fn method_ids_count_up_from_one() {
        let mut ids = MethodIds::default();
        assert_eq!([ids.next_id(), ids.next_id(), ids.next_id()], ["1", "2", "3"]);
    }
}
