//! Minimal Meteor accounts for the reference server: `createUser` and `login` (password digest, as
//! browsers send it, or a resume token), answered as accounts-password answers them. In memory;
//! tokens never expire within a run.

use std::collections::HashMap;
use std::sync::Mutex;

use ddp::message::DdpError;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Lifetime Meteor gives login tokens (90 days), for `tokenExpires`.
const TOKEN_DAYS_MS: i64 = 90 * 24 * 3600 * 1000;

struct User {
    id: String,
    email: Option<String>,
    /// Hex SHA-256 of the password (what the browser sends as `digest`).
    digest: String,
}

#[derive(Default)]
pub struct Accounts {
    inner: Mutex<(HashMap<String, User>, HashMap<String, String>)>,
}

fn sha256_hex(text: &str) -> String {
    Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

fn credentials_error() -> Box<DdpError> {
    Box::new(DdpError::meteor(403, "Something went wrong. Please check your credentials."))
}

/// The password of a request: `{digest, algorithm: "sha-256"}`, or a plain string.
fn digest_of(password: &Value) -> Option<String> {
    match password {
        Value::String(plain) if plain.len() <= 256 => Some(sha256_hex(plain)),
        Value::Object(o) if o.get("algorithm").and_then(Value::as_str) == Some("sha-256") => {
            o.get("digest").and_then(Value::as_str).map(str::to_lowercase)
        }
        _ => None,
    }
}

impl Accounts {
    /// Every login token issued so far (for tests that check no token leaks into a report).
    pub fn tokens(&self) -> Vec<String> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).1.keys().cloned().collect()
    }

    /// Adds a user with a plain password (server-side seeding).
    pub fn add(&self, username: &str, password: &str) -> String {
        let id = ddp::id::random_id();
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0.insert(username.to_string(), User { id: id.clone(), email: None, digest: sha256_hex(password) });
        id
    }

    fn issue(&self, g: &mut (HashMap<String, User>, HashMap<String, String>), user_id: &str, kind: &str) -> Value {
        let token = ddp::id::random_secret();
        g.1.insert(token.clone(), user_id.to_string());
        let expires = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or_default()
            + TOKEN_DAYS_MS;
        json!({"id": user_id, "token": token, "tokenExpires": {"$date": expires}, "type": kind})
    }

    /// `createUser {username, email?, password}`: creates and logs in.
    pub fn create_user(&self, arg: Option<&Value>) -> Result<Value, Box<DdpError>> {
        let arg = arg.and_then(Value::as_object).ok_or_else(|| Box::new(DdpError::meteor(400, "Match failed")))?;
        let username = arg.get("username").and_then(Value::as_str);
        let email = arg.get("email").and_then(Value::as_str);
        let name =
            username.or(email).ok_or_else(|| Box::new(DdpError::meteor(400, "Need to set a username or email")))?;
        let digest =
            arg.get("password").and_then(digest_of).ok_or_else(|| Box::new(DdpError::meteor(400, "Match failed")))?;
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if g.0.contains_key(name) {
            return Err(Box::new(DdpError::meteor(403, "Username already exists.")));
        }
        let id = ddp::id::random_id();
        g.0.insert(name.to_string(), User { id: id.clone(), email: email.map(str::to_string), digest });
        Ok(self.issue(&mut g, &id, "password"))
    }

    /// `login {user, password}` or `login {resume}`.
    pub fn login(&self, arg: Option<&Value>) -> Result<Value, Box<DdpError>> {
        let arg = arg.and_then(Value::as_object).ok_or_else(|| Box::new(DdpError::meteor(400, "Match failed")))?;
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(token) = arg.get("resume") {
            let user = token.as_str().and_then(|t| g.1.get(t)).cloned().ok_or_else(credentials_error)?;
            return Ok(self.issue(&mut g, &user, "resume"));
        }
        let (Some(user), Some(password)) = (arg.get("user"), arg.get("password")) else {
            return Err(Box::new(DdpError::meteor(400, "Unrecognized options for login request")));
        };
        let digest = digest_of(password).ok_or_else(credentials_error)?;
        let found = if let Some(name) = user.get("username").and_then(Value::as_str) {
            g.0.get(name)
        } else if let Some(email) = user.get("email").and_then(Value::as_str) {
            g.0.values().find(|u| u.email.as_deref() == Some(email)).or_else(|| g.0.get(email))
        } else if let Some(id) = user.get("id").and_then(Value::as_str) {
            g.0.values().find(|u| u.id == id)
        } else {
            None
        };
        let user = found.filter(|u| u.digest == digest).map(|u| u.id.clone()).ok_or_else(credentials_error)?;
        Ok(self.issue(&mut g, &user, "password"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn password_digest_resume_and_failures() {
        let a = Accounts::default();
        let id = a.add("ann", "secret");
        let digest = sha256_hex("secret");
        let ok = a
            .login(Some(&json!({"user": {"username": "ann"}, "password": {"digest": digest, "algorithm": "sha-256"}})))
            .unwrap();
        assert_eq!(ok["id"], id.as_str());
        assert_eq!(ok["type"], "password");
        assert_eq!(ok["token"].as_str().unwrap().len(), 43);
        assert!(ok["tokenExpires"]["$date"].is_i64());
        let again = a.login(Some(&json!({"resume": ok["token"]}))).unwrap();
        assert_eq!((again["id"].as_str(), again["type"].as_str()), (Some(id.as_str()), Some("resume")));
        // Each row: a bad login, the error code.
        let rows = [
            (
                json!({"user": {"username": "ann"}, "password": {"digest": sha256_hex("wrong"), "algorithm": "sha-256"}}),
                403,
            ),
            (json!({"user": {"username": "bob"}, "password": "secret"}), 403),
            (json!({"resume": "no-such-token"}), 403),
            (json!({"something": "else"}), 400),
        ];
        for (arg, code) in rows {
            assert_eq!(a.login(Some(&arg)).unwrap_err().error, json!(code), "{arg}");
        }
        let created = a
            .create_user(Some(
                &json!({"username": "cy", "password": {"digest": sha256_hex("pw"), "algorithm": "sha-256"}}),
            ))
            .unwrap();
        assert!(a.login(Some(&json!({"user": {"id": created["id"]}, "password": "pw"}))).is_ok());
        assert_eq!(a.create_user(Some(&json!({"username": "cy", "password": "x"}))).unwrap_err().error, json!(403));
    }
}
