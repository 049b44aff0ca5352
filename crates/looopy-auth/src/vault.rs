//! Sealing credentials at rest with XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`).
//!
//! A sealed value is `1 || nonce (24 bytes) || ciphertext+tag`. The nonce is random (192
//! bits: no counter to keep, no collision risk), and the principal and provider are the
//! associated data, so a row copied under another principal does not open.

use base64::Engine;
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand::RngCore;
use zeroize::Zeroizing;

use crate::AuthError;

const VERSION: u8 = 1;
const NONCE_LEN: usize = 24;

/// The 256-bit key credentials are sealed with (`--secret-key-file`, `LOOOPY_SECRET_KEY`).
/// Its `Debug` shows nothing of it.
#[derive(Clone)]
pub struct SecretKey(Zeroizing<[u8; 32]>);

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey([redacted])")
    }
}

impl SecretKey {
    /// A key from 64 hex digits or the base64 of 32 bytes (standard or URL-safe alphabet,
    /// padded or not) — e.g. the output of `openssl rand -hex 32`.
    pub fn parse(text: &str) -> Result<Self, AuthError> {
        let text = text.trim();
        let bytes: Zeroizing<Vec<u8>> = Zeroizing::new(
            if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
                (0..32)
                    .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                    .collect::<Result<Vec<u8>, _>>()
                    .map_err(|_| AuthError::Key("not hex".into()))?
            } else {
                let engines = [
                    &base64::engine::general_purpose::STANDARD,
                    &base64::engine::general_purpose::STANDARD_NO_PAD,
                    &base64::engine::general_purpose::URL_SAFE,
                    &base64::engine::general_purpose::URL_SAFE_NO_PAD,
                ];
                engines
                .iter()
                .find_map(|e| e.decode(text).ok())
                .ok_or_else(|| AuthError::Key("expected 64 hex digits or base64 of 32 bytes (try `openssl rand -hex 32`)".into()))?
            },
        );
        Self::from_bytes(&bytes)
    }

    /// A key from a file: 32 raw bytes, or the text [`parse`](Self::parse) reads.
    pub fn from_file(path: &std::path::Path) -> Result<Self, AuthError> {
        let bytes = Zeroizing::new(
            std::fs::read(path)
                .map_err(|e| AuthError::Key(format!("cannot read {}: {e}", path.display())))?,
        );
        if bytes.len() == 32 && std::str::from_utf8(&bytes).is_err() {
            return Self::from_bytes(&bytes);
        }
        let text = std::str::from_utf8(&bytes).map_err(|_| {
            AuthError::Key(format!(
                "{} is neither 32 raw bytes nor text",
                path.display()
            ))
        })?;
        Self::parse(text)
    }

    pub fn from_bytes(bytes: &[u8]) -> Result<Self, AuthError> {
        let key: [u8; 32] = bytes
            .try_into()
            .map_err(|_| AuthError::Key(format!("a key is 32 bytes, not {}", bytes.len())))?;
        Ok(Self(Zeroizing::new(key)))
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(self.0.as_ref().into())
    }

    /// Encrypts `plain`, bound to `(principal, provider)`.
    pub fn seal(
        &self,
        principal: &str,
        provider: &str,
        plain: &[u8],
    ) -> Result<Vec<u8>, AuthError> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rng().fill_bytes(&mut nonce);
        let aad = associated(principal, provider);
        let sealed = self
            .cipher()
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .map_err(|_| AuthError::Sealing("encryption failed".into()))?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(VERSION);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Decrypts what [`seal`](Self::seal) made for the same `(principal, provider)`;
    /// fails for another key, another binding, or tampered bytes.
    pub fn open(
        &self,
        principal: &str,
        provider: &str,
        sealed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, AuthError> {
        let (&version, rest) = sealed
            .split_first()
            .ok_or_else(|| AuthError::Sealing("empty sealed value".into()))?;
        if version != VERSION || rest.len() < NONCE_LEN {
            return Err(AuthError::Sealing(format!(
                "unknown sealed format (version {version})"
            )));
        }
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let aad = associated(principal, provider);
        self.cipher()
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| {
                AuthError::Sealing(
                    "the credential does not open with this key (wrong key, or tampered)".into(),
                )
            })
    }
}

fn associated(principal: &str, provider: &str) -> Vec<u8> {
    let mut aad = b"looopy-credential\0".to_vec();
    aad.extend_from_slice(principal.as_bytes());
    aad.push(0);
    aad.extend_from_slice(provider.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn keys_parse_from_hex_base64_and_files() {
        let a = SecretKey::parse(HEX).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD.encode((0u8..32).collect::<Vec<_>>());
        let b = SecretKey::parse(&format!("{b64}\n")).unwrap();
        assert_eq!(*a.0, *b.0);
        assert!(SecretKey::parse("short").is_err());
        assert!(SecretKey::parse(&HEX[..62]).is_err());
        let dir = tempfile::tempdir().unwrap();
        let raw = dir.path().join("raw");
        std::fs::write(&raw, [0xffu8; 32]).unwrap();
        assert_eq!(*SecretKey::from_file(&raw).unwrap().0, [0xff; 32]);
        let text = dir.path().join("text");
        std::fs::write(&text, format!("{HEX}\n")).unwrap();
        assert_eq!(*SecretKey::from_file(&text).unwrap().0, *a.0);
        assert_eq!(format!("{a:?}"), "SecretKey([redacted])");
    }

    #[test]
    fn sealed_values_open_only_with_their_key_and_binding() {
        let key = SecretKey::parse(HEX).unwrap();
        let sealed = key.seal("alice", "github", b"token").unwrap();
        assert!(!sealed.windows(5).any(|w| w == b"token"));
        assert_eq!(&**key.open("alice", "github", &sealed).unwrap(), b"token");
        assert!(key.open("bob", "github", &sealed).is_err());
        assert!(key.open("alice", "gitlab", &sealed).is_err());
        let other = SecretKey::from_bytes(&[7; 32]).unwrap();
        assert!(other.open("alice", "github", &sealed).is_err());
        let mut tampered = sealed.clone();
        if let Some(last) = tampered.last_mut() {
            *last ^= 1;
        }
        assert!(key.open("alice", "github", &tampered).is_err());
        assert!(key.open("alice", "github", &[]).is_err());
        assert_ne!(
            sealed,
            key.seal("alice", "github", b"token").unwrap(),
            "fresh nonce each time"
        );
    }
}
