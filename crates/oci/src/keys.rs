//! ECDSA P-256 keys in the PEM forms cosign reads and writes.
//!
//! - Public: PKIX `PUBLIC KEY` (what `cosign generate-key-pair` writes to `cosign.pub` and
//!   `openssl pkey -pubout` prints).
//! - Private: cosign's `ENCRYPTED SIGSTORE PRIVATE KEY` (or the older `ENCRYPTED COSIGN
//!   PRIVATE KEY`): a JSON envelope, scrypt for the key and NaCl secretbox for the PKCS#8
//!   document; or an unencrypted PKCS#8 `PRIVATE KEY` (`openssl genpkey -algorithm EC
//!   -pkeyopt ec_paramgen_curve:P-256`).
//!
//! The signatures are ECDSA over SHA-256, ASN.1 DER encoded, as cosign makes them. The
//! arithmetic is `ring`'s, which the product already links for TLS: no second crypto library.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _,
    UnparsedPublicKey,
};
use sha2::{Digest as _, Sha256};

/// The DER prefix of a P-256 `SubjectPublicKeyInfo` up to the uncompressed point:
/// `SEQUENCE { SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits) }`.
/// Every P-256 key cosign, Go or OpenSSL writes starts with exactly these bytes, so a fixed
/// prefix is a complete parser for the one algorithm this build accepts.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The OID of `id-ecPublicKey` (1.2.840.10045.2.1), to tell an EC key on another curve from
/// a key of another algorithm in messages.
const EC_PUBLIC_KEY_OID: [u8; 9] = [0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];

/// PEM labels of cosign's encrypted private keys (current, then before cosign 1.x).
const ENCRYPTED_LABELS: [&str; 2] = [
    "ENCRYPTED SIGSTORE PRIVATE KEY",
    "ENCRYPTED COSIGN PRIVATE KEY",
];

/// An ECDSA P-256 public key.
#[derive(Clone, PartialEq, Eq)]
pub struct PublicKey {
    /// The uncompressed point (`04 || X || Y`), what `ring` verifies with.
    point: Vec<u8>,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.fingerprint())
    }
}

impl PublicKey {
    /// Parses a PEM `PUBLIC KEY` (PKIX). Anything but ECDSA P-256 is refused with a message
    /// saying what it is and what is accepted.
    pub fn from_pem(pem_text: &str) -> Result<PublicKey, String> {
        let block = pem::parse(pem_text.trim()).map_err(|e| {
            format!("not a PEM public key ({e}): expected -----BEGIN PUBLIC KEY-----")
        })?;
        if block.tag() != "PUBLIC KEY" {
            return Err(format!(
                "a PEM {:?} block, not a PUBLIC KEY: give the public half (cosign.pub, or `openssl pkey -pubout`)",
                block.tag()
            ));
        }
        PublicKey::from_spki_der(block.contents())
    }

    /// Parses a DER `SubjectPublicKeyInfo`.
    pub fn from_spki_der(der: &[u8]) -> Result<PublicKey, String> {
        if der.len() == P256_SPKI_PREFIX.len() + 65
            && der.starts_with(&P256_SPKI_PREFIX)
            && der[P256_SPKI_PREFIX.len()] == 0x04
        {
            let point = der[P256_SPKI_PREFIX.len()..].to_vec();
            // A point off the curve fails every verification (ring checks it then).
            return Ok(PublicKey { point });
        }
        let is_ec = der
            .windows(EC_PUBLIC_KEY_OID.len())
            .any(|w| w == EC_PUBLIC_KEY_OID);
        Err(if is_ec {
            "an elliptic-curve key that is not an uncompressed P-256 key: only ECDSA P-256 (cosign's default, `cosign generate-key-pair`) is supported".to_string()
        } else {
            "not an ECDSA P-256 public key (RSA and Ed25519 keys are not supported in this build): sign with an ECDSA P-256 key, as `cosign generate-key-pair` makes".to_string()
        })
    }

    /// The DER `SubjectPublicKeyInfo`.
    pub fn spki_der(&self) -> Vec<u8> {
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(&self.point);
        der
    }

    /// The PEM `PUBLIC KEY`, as cosign writes `cosign.pub`.
    pub fn to_pem(&self) -> String {
        pem::encode_config(
            &pem::Pem::new("PUBLIC KEY", self.spki_der()),
            pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
        )
    }

    /// `SHA256:` and the first 16 hex digits of the DER key's SHA-256: names the key in
    /// messages without printing it.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::digest(self.spki_der());
        format!("SHA256:{}", &hex::encode(digest)[..16])
    }

    /// Whether `signature` (ASN.1 DER ECDSA, SHA-256) is this key's signature of `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &self.point)
            .verify(message, signature)
            .is_ok()
    }
}

/// An ECDSA P-256 private key that signs.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    rng: SystemRandom,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({})", self.public_key().fingerprint())
    }
}

impl SigningKey {
    /// A new random key, as PKCS#8 DER (for tests and for `generate`-style tools).
    pub fn generate_pkcs8() -> Result<Vec<u8>, String> {
        let rng = SystemRandom::new();
        EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng)
            .map(|doc| doc.as_ref().to_vec())
            .map_err(|_| "cannot generate a key: the system's random source failed".to_string())
    }

    /// A key from PKCS#8 DER.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<SigningKey, String> {
        let rng = SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, der, &rng).map_err(
            |e| format!("not an ECDSA P-256 PKCS#8 private key ({e}): only P-256 keys sign in this build"),
        )?;
        Ok(SigningKey { pair, rng })
    }

    /// Parses a PEM private key: cosign's encrypted form (decrypted with `password`) or an
    /// unencrypted PKCS#8 `PRIVATE KEY`.
    pub fn from_pem(pem_text: &str, password: Option<&[u8]>) -> Result<SigningKey, String> {
        let block = pem::parse(pem_text.trim()).map_err(|e| {
            format!("not a PEM private key ({e}): give cosign.key or a PKCS#8 PEM file")
        })?;
        match block.tag() {
            "PRIVATE KEY" => SigningKey::from_pkcs8_der(block.contents()),
            tag if ENCRYPTED_LABELS.contains(&tag) => {
                let password = password.ok_or_else(|| {
                    "the key is encrypted (cosign.key): set COSIGN_PASSWORD to its password"
                        .to_string()
                })?;
                let der = decrypt_cosign_key(block.contents(), password)?;
                SigningKey::from_pkcs8_der(&der)
            }
            "EC PRIVATE KEY" => Err(
                "a SEC1 \"EC PRIVATE KEY\": convert it to PKCS#8 with `openssl pkcs8 -topk8 -nocrypt -in KEY`"
                    .to_string(),
            ),
            "PUBLIC KEY" => Err("a public key: signing needs the private key".to_string()),
            other => Err(format!(
                "a PEM {other:?} block: expected ENCRYPTED SIGSTORE PRIVATE KEY (cosign.key) or PRIVATE KEY (PKCS#8)"
            )),
        }
    }

    /// The public half.
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            point: self.pair.public_key().as_ref().to_vec(),
        }
    }

    /// ECDSA P-256 over SHA-256 of `message`, ASN.1 DER encoded.
    pub fn sign(&self, message: &[u8]) -> Result<Vec<u8>, String> {
        self.pair
            .sign(&self.rng, message)
            .map(|s| s.as_ref().to_vec())
            .map_err(|_| "signing failed: the system's random source failed".to_string())
    }
}

/// cosign's encrypted key envelope (field names as cosign writes them).
#[derive(serde::Serialize, serde::Deserialize)]
struct Envelope {
    kdf: Kdf,
    cipher: Cipher,
    ciphertext: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Kdf {
    name: String,
    params: ScryptParams,
    salt: String,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ScryptParams {
    #[serde(rename = "N")]
    n: u64,
    r: u32,
    p: u32,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Cipher {
    name: String,
    nonce: String,
}

/// The largest scrypt cost accepted from a key file: cosign uses 2^15 (older) or 2^16; a
/// hostile file must not make us allocate gigabytes.
const MAX_SCRYPT_LOG_N: u8 = 20;

fn decrypt_cosign_key(envelope: &[u8], password: &[u8]) -> Result<Vec<u8>, String> {
    use crypto_secretbox::aead::{Aead as _, KeyInit as _};
    let env: Envelope = serde_json::from_slice(envelope)
        .map_err(|e| format!("the encrypted key's envelope is not cosign's JSON: {e}"))?;
    if env.kdf.name != "scrypt" || env.cipher.name != "nacl/secretbox" {
        return Err(format!(
            "the key is encrypted with {}/{}: only cosign's scrypt/nacl-secretbox is supported",
            env.kdf.name, env.cipher.name
        ));
    }
    let key = derive_key(password, &env.kdf)?;
    let nonce = B64
        .decode(&env.cipher.nonce)
        .map_err(|e| format!("the encrypted key's nonce is not base64: {e}"))?;
    if nonce.len() != 24 {
        return Err("the encrypted key's nonce is not 24 bytes".to_string());
    }
    let ciphertext = B64
        .decode(&env.ciphertext)
        .map_err(|e| format!("the encrypted key's ciphertext is not base64: {e}"))?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new((&key).into());
    cipher
        .decrypt(nonce.as_slice().into(), ciphertext.as_slice())
        .map_err(|_| {
            "cannot decrypt the key: wrong password (check COSIGN_PASSWORD) or a damaged key file"
                .to_string()
        })
}

fn derive_key(password: &[u8], kdf: &Kdf) -> Result<[u8; 32], String> {
    let salt = B64
        .decode(&kdf.salt)
        .map_err(|e| format!("the encrypted key's salt is not base64: {e}"))?;
    let n = kdf.params.n;
    if !n.is_power_of_two() || n < 2 || n.trailing_zeros() > u32::from(MAX_SCRYPT_LOG_N) {
        return Err(format!(
            "the encrypted key's scrypt cost N={n} is not a power of two up to 2^{MAX_SCRYPT_LOG_N}"
        ));
    }
    if kdf.params.r == 0 || kdf.params.r > 32 || kdf.params.p == 0 || kdf.params.p > 16 {
        return Err("the encrypted key's scrypt parameters r/p are out of range".to_string());
    }
    let params = scrypt::Params::new(n.trailing_zeros() as u8, kdf.params.r, kdf.params.p, 32)
        .map_err(|e| format!("the encrypted key's scrypt parameters are refused: {e}"))?;
    let mut key = [0u8; 32];
    scrypt::scrypt(password, &salt, &params, &mut key)
        .map_err(|e| format!("cannot derive the key's encryption key: {e}"))?;
    Ok(key)
}

/// Encrypts a PKCS#8 DER key in cosign's envelope and returns the PEM (`ENCRYPTED SIGSTORE
/// PRIVATE KEY`). `log_n` is scrypt's cost (cosign uses 15); tests use less.
pub fn encrypt_cosign_key(pkcs8_der: &[u8], password: &[u8], log_n: u8) -> Result<String, String> {
    use crypto_secretbox::aead::{Aead as _, KeyInit as _};
    let rng = SystemRandom::new();
    let mut salt = [0u8; 32];
    let mut nonce = [0u8; 24];
    ring::rand::SecureRandom::fill(&rng, &mut salt)
        .and_then(|()| ring::rand::SecureRandom::fill(&rng, &mut nonce))
        .map_err(|_| "the system's random source failed".to_string())?;
    let kdf = Kdf {
        name: "scrypt".into(),
        params: ScryptParams {
            n: 1u64 << log_n,
            r: 8,
            p: 1,
        },
        salt: B64.encode(salt),
    };
    let key = derive_key(password, &kdf)?;
    let cipher = crypto_secretbox::XSalsa20Poly1305::new((&key).into());
    let ciphertext = cipher
        .encrypt((&nonce).into(), pkcs8_der)
        .map_err(|_| "encryption failed".to_string())?;
    let envelope = Envelope {
        kdf,
        cipher: Cipher {
            name: "nacl/secretbox".into(),
            nonce: B64.encode(nonce),
        },
        ciphertext: B64.encode(ciphertext),
    };
    let json = serde_json::to_vec(&envelope).map_err(|e| e.to_string())?;
    Ok(pem::encode_config(
        &pem::Pem::new(ENCRYPTED_LABELS[0], json),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    ))
}

/// The PEM `PRIVATE KEY` (unencrypted PKCS#8) of DER bytes.
pub fn pkcs8_pem(pkcs8_der: &[u8]) -> String {
    pem::encode_config(
        &pem::Pem::new("PRIVATE KEY", pkcs8_der.to_vec()),
        pem::EncodeConfig::new().set_line_ending(pem::LineEnding::LF),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_verify_and_pem_round_trips() {
        let der = SigningKey::generate_pkcs8().unwrap();
        let key = SigningKey::from_pem(&pkcs8_pem(&der), None).unwrap();
        let public = PublicKey::from_pem(&key.public_key().to_pem()).unwrap();
        assert_eq!(public, key.public_key());
        let sig = key.sign(b"payload").unwrap();
        assert!(public.verify(b"payload", &sig));
        assert!(!public.verify(b"payloaD", &sig));
        let other = SigningKey::from_pkcs8_der(&SigningKey::generate_pkcs8().unwrap()).unwrap();
        assert!(!other.public_key().verify(b"payload", &sig));
    }

    #[test]
    fn encrypted_keys_need_the_right_password() {
        let der = SigningKey::generate_pkcs8().unwrap();
        let pem_text = encrypt_cosign_key(&der, b"hunter2", 10).unwrap();
        assert!(pem_text.starts_with("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----"));
        let key = SigningKey::from_pem(&pem_text, Some(b"hunter2")).unwrap();
        let expected = SigningKey::from_pkcs8_der(&der).unwrap().public_key();
        assert_eq!(key.public_key(), expected);
        let wrong = SigningKey::from_pem(&pem_text, Some(b"hunter3")).unwrap_err();
        assert!(wrong.contains("wrong password"), "{wrong}");
        let none = SigningKey::from_pem(&pem_text, None).unwrap_err();
        assert!(none.contains("COSIGN_PASSWORD"), "{none}");
    }

    #[test]
    fn other_keys_and_garbage_are_refused_with_a_reason() {
        assert!(PublicKey::from_pem("hello").unwrap_err().contains("PEM"));
        let rsa_like = pem::encode(&pem::Pem::new(
            "PUBLIC KEY",
            vec![0x30, 0x03, 0x02, 0x01, 0x00],
        ));
        assert!(
            PublicKey::from_pem(&rsa_like)
                .unwrap_err()
                .contains("not an ECDSA P-256")
        );
        let private = pkcs8_pem(&SigningKey::generate_pkcs8().unwrap());
        assert!(
            PublicKey::from_pem(&private)
                .unwrap_err()
                .contains("public half")
        );
        let huge = format!(
            "{{\"kdf\":{{\"name\":\"scrypt\",\"params\":{{\"N\":{},\"r\":8,\"p\":1}},\"salt\":\"\"}},\"cipher\":{{\"name\":\"nacl/secretbox\",\"nonce\":\"\"}},\"ciphertext\":\"\"}}",
            1u64 << 40
        );
        let block = pem::encode(&pem::Pem::new(ENCRYPTED_LABELS[0], huge.into_bytes()));
        assert!(
            SigningKey::from_pem(&block, Some(b"x"))
                .unwrap_err()
                .contains("scrypt cost")
        );
    }
}
