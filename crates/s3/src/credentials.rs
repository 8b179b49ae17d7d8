//! The access keys the gateway accepts: a TOML file of `[[keys]]` tables, each an
//! `access_key` and a `secret_key`, as an operator keeps them beside the cluster secret.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// One S3 identity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Key {
    pub access_key: String,
    pub secret_key: String,
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeysFile {
    #[serde(default)]
    keys: Vec<Key>,
}

/// The keys in `path`: at least one, access keys 3 to 128 printable ASCII characters,
/// secrets at least 8, no access key twice.
pub fn load(path: &Path) -> Result<Vec<Key>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("credentials file {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("credentials file {}: {e}", path.display()))
}

/// The keys of a credentials file's text (see [`load`]).
pub fn parse(text: &str) -> Result<Vec<Key>, String> {
    let f: KeysFile = toml::from_str(text).map_err(|e| e.to_string())?;
    if f.keys.is_empty() {
        return Err("no [[keys]] in it: at least one access_key and secret_key".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    for k in &f.keys {
        let printable = |s: &str| s.bytes().all(|b| b.is_ascii_graphic());
        if !(3..=128).contains(&k.access_key.len()) || !printable(&k.access_key) {
            return Err(format!("access key '{}': 3 to 128 printable ASCII characters", k.access_key));
        }
        if k.secret_key.len() < 8 || !printable(&k.secret_key) {
            return Err(format!("the secret of '{}': at least 8 printable ASCII characters", k.access_key));
        }
        if !seen.insert(&k.access_key) {
            return Err(format!("access key '{}' is given twice", k.access_key));
        }
    }
    Ok(f.keys)
}

/// A new random key: a 20-character access key and a 40-character secret, as AWS's.
pub fn generate() -> Key {
    use rand::Rng;
    let mut rng = rand::rng();
    let upper: Vec<u8> = (b'A'..=b'Z').chain(b'0'..=b'9').collect();
    let any: Vec<u8> = (b'A'..=b'Z').chain(b'a'..=b'z').chain(b'0'..=b'9').collect();
    let pick = |set: &[u8], n: usize, rng: &mut rand::rngs::ThreadRng| -> String {
        (0..n).map(|_| set[rng.random_range(0..set.len())] as char).collect()
    };
    Key { access_key: format!("KI{}", pick(&upper, 18, &mut rng)), secret_key: pick(&any, 40, &mut rng) }
}

/// Writes a credentials file holding `key`, readable by its owner only (temp, fsync,
/// rename: a crash leaves the old file or the new one).
pub fn write(path: &Path, key: &Key) -> Result<(), String> {
    use std::io::Write;
    let text = toml::to_string(&KeysFile { keys: vec![key.clone()] }).map_err(|e| e.to_string())?;
    let tmp = path.with_extension("tmp");
    let w = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        #[cfg(unix)]
        std::fs::set_permissions(&tmp, std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
        f.write_all(format!("# S3 access keys of this kintsugi store\n{text}").as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    };
    w().map_err(|e| format!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_of_keys_is_read_and_bad_ones_are_refused() {
        let ok = parse("[[keys]]\naccess_key = \"AKIA1\"\nsecret_key = \"s3cr3t-long\"\n").unwrap();
        assert_eq!(ok[0].access_key, "AKIA1");
        assert!(parse("").unwrap_err().contains("no [[keys]]"));
        assert!(parse("[[keys]]\naccess_key = \"AK\"\nsecret_key = \"s3cr3t-long\"\n").is_err());
        assert!(parse("[[keys]]\naccess_key = \"AKIA1\"\nsecret_key = \"short\"\n").is_err());
        assert!(parse("[[keys]]\naccess_key = \"AKIA1\"\nsecret_key = \"s3cr3t-long\"\nextra = 1\n").is_err());
        let twice = "[[keys]]\naccess_key = \"AKIA1\"\nsecret_key = \"s3cr3t-long\"\n".repeat(2);
        assert!(parse(&twice).unwrap_err().contains("twice"));
    }

    #[test]
    fn a_generated_key_round_trips_through_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let k = generate();
        assert_ne!(k, generate());
        let p = dir.path().join("credentials.toml");
        write(&p, &k).unwrap();
        assert_eq!(load(&p).unwrap(), vec![k]);
        #[cfg(unix)]
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&p).unwrap().permissions()) & 0o777, 0o600);
    }
}
