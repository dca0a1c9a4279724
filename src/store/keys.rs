//! API keys: `mg_live_<id>_<secret>`, drawn from the OS CSPRNG, stored only as a hash.
//!
//! The id (12 characters) is public: it names the key in the CLI and the journal. The secret
//! (32 characters of [A-Za-z0-9], about 190 bits) is shown once at creation. Because secrets
//! are long and random, a fast hash (SHA-256) is enough: there is nothing to brute-force, so a
//! slow password hash would only cost CPU on every request. Hashes are compared in constant
//! time.

use subtle::ConstantTimeEq;

pub const KEY_PREFIX: &str = "mg_live_";
pub const KEY_ID_LEN: usize = 12;
pub const KEY_SECRET_LEN: usize = 32;
pub const KEY_LEN: usize = KEY_PREFIX.len() + KEY_ID_LEN + 1 + KEY_SECRET_LEN;

const ALPHANUMERIC: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A freshly made key: the only time its secret exists outside the caller.
pub struct NewKey {
    pub id: String,
    pub key: String,
    pub sha256: [u8; 32],
}

/// Draws a new key from the OS random source.
pub fn generate() -> std::io::Result<NewKey> {
    let id = random_alphanumeric(KEY_ID_LEN)?;
    let secret = random_alphanumeric(KEY_SECRET_LEN)?;
    let key = format!("{KEY_PREFIX}{id}_{secret}");
    let sha256 = hash(&key);
    Ok(NewKey { id, key, sha256 })
}

/// Uniform characters of [A-Za-z0-9] by rejection sampling (bytes >= 248 are redrawn, so
/// `byte % 62` has no bias).
fn random_alphanumeric(len: usize) -> std::io::Result<String> {
    let mut out = String::with_capacity(len);
    let mut pool = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut pool).map_err(|error| std::io::Error::other(error.to_string()))?;
        for &byte in &pool {
            if byte < 248 && out.len() < len {
                out.push(ALPHANUMERIC[usize::from(byte % 62)] as char);
            }
        }
    }
    Ok(out)
}

pub fn hash(key: &str) -> [u8; 32] {
    let digest = ring::digest::digest(&ring::digest::SHA256, key.as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// Returns the id of a well-formed key, or `None`.
///
/// The key comes from the outside world and may hold any UTF-8: it is checked byte by byte,
/// and the id is cut only once every byte is known to be ASCII, so no index can fall inside a
/// character.
pub fn parse_id(key: &str) -> Option<&str> {
    let bytes = key.as_bytes();
    let rest = bytes.strip_prefix(KEY_PREFIX.as_bytes())?;
    if rest.len() != KEY_ID_LEN + 1 + KEY_SECRET_LEN {
        return None;
    }
    let (id, rest) = rest.split_at(KEY_ID_LEN);
    let (separator, secret) = rest.split_first()?;
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    if *separator != b'_' || !id.iter().all(alnum) || !secret.iter().all(alnum) {
        return None;
    }
    // Every byte of `id` is ASCII, so it is whole characters.
    std::str::from_utf8(id).ok()
}

pub fn is_valid_id(id: &str) -> bool {
    id.len() == KEY_ID_LEN && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Constant-time comparison of a presented key with a stored hash.
pub fn verify(key: &str, stored: &[u8; 32]) -> bool {
    hash(key).ct_eq(stored).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_have_the_format() {
        let new = generate().unwrap();
        assert_eq!(new.key.len(), KEY_LEN);
        assert_eq!(parse_id(&new.key), Some(new.id.as_str()));
        assert!(verify(&new.key, &new.sha256));
        assert!(!verify(
            &new.key.replace(&new.id, "AAAAAAAAAAAA"),
            &new.sha256
        ));
        assert_ne!(generate().unwrap().key, new.key);
    }

    #[test]
    fn malformed_keys() {
        let good = format!("mg_live_{}_{}", "a".repeat(12), "B".repeat(32));
        assert!(parse_id(&good).is_some());
        for bad in [
            String::new(),
            good.replace("mg_live_", "mg_test_"),
            format!("mg_live_{}_{}", "a".repeat(11), "B".repeat(33)),
            format!("mg_live_{}-{}", "a".repeat(12), "B".repeat(32)),
            format!("mg_live_{}_{}", "a".repeat(12), "B".repeat(31) + "é"),
            format!("mg_live_{}_{}", "a".repeat(12), "B".repeat(33)),
            format!("mg_live_{}_{}", "a".repeat(11) + "_", "B".repeat(32)),
        ] {
            assert_eq!(parse_id(&bad), None, "{bad}");
        }
    }

    /// Issue 14, defect 1: a multibyte character where the id ends panicked the shard.
    #[test]
    fn a_non_ascii_key_is_malformed_not_a_panic() {
        for bad in [
            "mg_live_AAAAAAAAAAAéBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
            "mg_live_AAAAAAAAAAAAé_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
            "mg_live_éAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
            "mg_live_AAAAAAAAAAAA_BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBé",
            "mg_live_AAAAAAAAAAA\u{1F600}BBBBBBBBBBBBBBBBBBBBBBBBBBBBBB",
        ] {
            assert_eq!(parse_id(bad), None, "{bad:?}");
        }
    }

    proptest::proptest! {
        #[test]
        fn any_text_parses_or_is_refused(key in "\\PC{0,80}") {
            if let Some(id) = parse_id(&key) {
                proptest::prop_assert!(is_valid_id(id));
                proptest::prop_assert_eq!(key.len(), KEY_LEN);
            }
        }

        #[test]
        fn any_text_of_key_length_parses_or_is_refused(
            id in "[A-Za-z0-9é😀_]{10,13}",
            secret in "[A-Za-z0-9é😀_]{30,33}",
        ) {
            let key = format!("{KEY_PREFIX}{id}_{secret}");
            let parsed = parse_id(&key);
            let well_formed = key.is_ascii() && key.len() == KEY_LEN && is_valid_id(&id)
                && secret.bytes().all(|b| b.is_ascii_alphanumeric());
            proptest::prop_assert_eq!(parsed.is_some(), well_formed);
        }
    }

    #[test]
    fn characters_are_roughly_uniform() {
        let text = random_alphanumeric(62 * 200).unwrap();
        let mut counts = [0u32; 62];
        for b in text.bytes() {
            counts[ALPHANUMERIC.iter().position(|&c| c == b).unwrap()] += 1;
        }
        // Expected 200 each; a fair source stays well inside [100, 300].
        assert!(
            counts.iter().all(|&n| (100..300).contains(&n)),
            "{counts:?}"
        );
    }
}
