//! SSE-S3's master keys: read from a file the gateway is given, they wrap each object's data
//! key. The file holds one key a line, `ID BASE64-OF-32-BYTES`; the first wraps new objects,
//! the others still open the objects they wrapped (a rotation puts a new key first).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    #[error("reading the master key file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path} line {line}: {why} (a line is `ID BASE64-OF-32-RANDOM-BYTES`)")]
    Line { path: PathBuf, line: usize, why: String },
    #[error("{path} holds no key")]
    Empty { path: PathBuf },
    #[error("{path} is readable by others than its owner (mode {mode:o}): chmod 600 it")]
    Open { path: PathBuf, mode: u32 },
}

/// The master keys.
#[derive(Clone)]
pub struct MasterKeys {
    current: String,
    keys: BTreeMap<String, [u8; 32]>,
}

impl std::fmt::Debug for MasterKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MasterKeys {{ current: {}, ids: {:?} }}", self.current, self.keys.keys().collect::<Vec<_>>())
    }
}

impl MasterKeys {
    pub fn load(path: &Path) -> Result<MasterKeys, KeyFileError> {
        use base64::Engine;
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path).map_err(|source| KeyFileError::Read { path: path.into(), source })?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(KeyFileError::Open { path: path.into(), mode });
        }
        let text = std::fs::read_to_string(path).map_err(|source| KeyFileError::Read { path: path.into(), source })?;
        let mut current = None;
        let mut keys = BTreeMap::new();
        for (i, l) in text.lines().enumerate() {
            let l = l.trim();
            if l.is_empty() || l.starts_with('#') {
                continue;
            }
            let bad = |why: &str| KeyFileError::Line { path: path.into(), line: i + 1, why: why.into() };
            let (id, b64) = l.split_once(char::is_whitespace).ok_or_else(|| bad("no key after the id"))?;
            if !id.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_') || id.len() > 64 {
                return Err(bad("an id is up to 64 letters, digits, '-' and '_'"));
            }
            let key = base64::engine::general_purpose::STANDARD.decode(b64.trim()).map_err(|_| bad("the key is not base64"))?;
            let key: [u8; 32] = key.try_into().map_err(|_| bad("a key is 32 bytes"))?;
            if keys.insert(id.to_string(), key).is_some() {
                return Err(bad("the id is given twice"));
            }
            current.get_or_insert_with(|| id.to_string());
        }
        let current = current.ok_or_else(|| KeyFileError::Empty { path: path.into() })?;
        Ok(MasterKeys { current, keys })
    }

    /// Writes a file with one new random key `id`, readable by its owner only; an existing
    /// file is left as it is. True when it made one.
    pub fn create(path: &Path, id: &str) -> std::io::Result<bool> {
        use base64::Engine;
        use ring::rand::SecureRandom;
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let mut key = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut key).map_err(|_| std::io::Error::other("no random numbers"))?;
        let line = format!(
            "# kintsugi SSE-S3 master keys: the first wraps new objects; keep older ones to read theirs\n{id} {}\n",
            base64::engine::general_purpose::STANDARD.encode(key)
        );
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        f.write_all(line.as_bytes())?;
        f.sync_all()?;
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {
                std::fs::remove_file(&tmp)?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&tmp)?;
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Puts a new random key `id` first in the file at `path` (made if absent), so that it
    /// wraps new objects; the keys after it still open what they wrapped. Written to a
    /// temporary file, synced and renamed over the old one.
    pub fn rotate(path: &Path, id: &str) -> Result<(), KeyFileError> {
        use base64::Engine;
        use ring::rand::SecureRandom;
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let io = |source| KeyFileError::Read { path: path.into(), source };
        if MasterKeys::create(path, id).map_err(io)? {
            return Ok(());
        }
        let old = MasterKeys::load(path)?;
        if old.get(id).is_some() {
            return Err(KeyFileError::Line { path: path.into(), line: 0, why: format!("the file has a key '{id}' already") });
        }
        let mut key = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut key).map_err(|_| io(std::io::Error::other("no random numbers")))?;
        let text = std::fs::read_to_string(path).map_err(io)?;
        let (comments, keys): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.trim().is_empty() || l.trim_start().starts_with('#'));
        let mut out = comments.join("\n");
        out.push_str(&format!("\n{id} {}\n", base64::engine::general_purpose::STANDARD.encode(key)));
        for l in keys {
            out.push_str(l);
            out.push('\n');
        }
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).map_err(io)?;
        f.write_all(out.trim_start().as_bytes()).map_err(io)?;
        f.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path).map_err(io)?;
        if let Some(dir) = path.parent() {
            let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
        }
        Ok(())
    }

    /// The key new objects are wrapped with.
    pub fn current(&self) -> (&str, &[u8; 32]) {
        (&self.current, &self.keys[&self.current])
    }

    pub fn get(&self, id: &str) -> Option<&[u8; 32]> {
        self.keys.get(id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.keys.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_key_file_is_made_once_and_read_back_and_bad_ones_are_refused_by_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sse.key");
        assert!(MasterKeys::create(&p, "k1").unwrap());
        assert!(!MasterKeys::create(&p, "k2").unwrap(), "an existing file is kept");
        let k = MasterKeys::load(&p).unwrap();
        assert_eq!(k.current().0, "k1");
        let text = std::fs::read_to_string(&p).unwrap();
        let rotated = d.path().join("rotated.key");
        std::fs::write(&rotated, format!("new {}\n{}", base64_of(&[7u8; 32]), text)).unwrap();
        std::fs::set_permissions(&rotated, std::fs::Permissions::from_mode(0o600)).unwrap();
        let r = MasterKeys::load(&rotated).unwrap();
        assert_eq!(r.current(), ("new", &[7u8; 32]));
        assert_eq!(r.get("k1"), k.get("k1"));
        for (bad, why) in [
            ("k1\n", "no key"),
            ("k1 notbase64!\n", "base64"),
            ("k1 AAAA\n", "32 bytes"),
            (&*format!("a/b {}\n", base64_of(&[1; 32])), "id"),
            (&*format!("k {}\nk {}\n", base64_of(&[1; 32]), base64_of(&[2; 32])), "twice"),
            ("# nothing\n", "no key"),
        ] {
            std::fs::write(&rotated, bad).unwrap();
            let e = MasterKeys::load(&rotated).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(MasterKeys::load(&p), Err(KeyFileError::Open { .. })));
    }

    #[test]
    fn a_rotation_puts_a_new_key_first_and_keeps_the_old_ones() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sse.key");
        MasterKeys::rotate(&p, "one").unwrap();
        let first = MasterKeys::load(&p).unwrap();
        MasterKeys::rotate(&p, "two").unwrap();
        let both = MasterKeys::load(&p).unwrap();
        assert_eq!(both.current().0, "two");
        assert_eq!(both.get("one"), first.get("one"));
        assert_ne!(both.get("two"), both.get("one"));
        assert!(MasterKeys::rotate(&p, "one").is_err(), "an id already there");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
    }

    fn base64_of(b: &[u8]) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(b)
    }
}
