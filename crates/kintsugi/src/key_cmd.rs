//! `kintsugi key ...`: the S3 access keys kept in the cluster's metadata, each with its own
//! permissions per bucket (see `kintsugi_s3::access_keys`), of which every gateway takes a
//! change within a second; and SSE-S3's master key file (`kintsugi_s3::sse`).

use crate::cluster_cmd::{client, runtime, Target};
use anyhow::{anyhow, Result};
use clap::Subcommand;
use kintsugi_s3::access_keys::{self, Permission, ScopedKey};

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// Make a new key (its secret is printed once) with no bucket yet.
    Create {
        /// What the key is for, shown by `key ls`.
        #[arg(long, default_value = "")]
        name: String,
        /// Let the key create buckets (it owns those it creates).
        #[arg(long)]
        create_bucket: bool,
        #[command(flatten)]
        target: Target,
    },
    /// List the keys with their permissions (not their secrets).
    Ls {
        #[command(flatten)]
        target: Target,
    },
    /// Let a key read, write or own a bucket (owner: also change the bucket's settings,
    /// bypass GOVERNANCE retention and delete it).
    Allow {
        access_key: String,
        bucket: String,
        /// read, write or owner.
        permission: Permission,
        #[command(flatten)]
        target: Target,
    },
    /// Take every permission a key has in a bucket away.
    Deny {
        access_key: String,
        bucket: String,
        #[command(flatten)]
        target: Target,
    },
    /// Revoke a key: every gateway refuses it within a second.
    Revoke {
        access_key: String,
        #[command(flatten)]
        target: Target,
    },
    /// Make an SSE-S3 master key file for `kintsugi s3 --sse-key-file` (mode 0600), or put a
    /// new key first in an existing one: a rotation. Gateways started with the file wrap new
    /// objects with the new key; older objects open with the keys after it until `key rewrap`.
    Master {
        file: std::path::PathBuf,
        /// The new key's id [default: k<seconds since the epoch>].
        #[arg(long)]
        id: Option<String>,
    },
    /// Re-wrap every SSE-S3 object's data key with the file's first (current) master key:
    /// only metadata changes, no chunk is rewritten. Afterwards the older keys can leave the file.
    Rewrap {
        /// The master key file (as given to `kintsugi s3 --sse-key-file`).
        #[arg(long)]
        sse_key_file: std::path::PathBuf,
        #[command(flatten)]
        target: Target,
    },
}

fn shown(k: &ScopedKey) -> serde_json::Value {
    let grants: serde_json::Map<String, serde_json::Value> = k.grants.iter().map(|(b, p)| (b.clone(), p.as_str().into())).collect();
    serde_json::json!({ "access_key": k.access_key, "name": k.name, "create_bucket": k.create_bucket, "buckets": grants })
}

fn grants_text(k: &ScopedKey) -> String {
    let g: Vec<String> = k.grants.iter().map(|(b, p)| format!("{b}:{}", p.as_str())).collect();
    if g.is_empty() {
        "-".into()
    } else {
        g.join(",")
    }
}

pub fn key(cmd: KeyCmd) -> Result<()> {
    runtime()?.block_on(async {
        match cmd {
            KeyCmd::Create { name, create_bucket, target } => {
                let k = access_keys::create(&client(&target)?, &name, create_bucket).await?;
                if target.json {
                    let mut v = shown(&k);
                    v["secret_key"] = k.secret_key.clone().into();
                    println!("{v}");
                } else {
                    println!("access key: {}\nsecret key: {}", k.access_key, k.secret_key);
                    println!("(no bucket yet: kintsugi key allow {} BUCKET read|write|owner)", k.access_key);
                }
            }
            KeyCmd::Ls { target } => {
                let keys = access_keys::list(&client(&target)?).await?;
                if target.json {
                    println!("{}", serde_json::Value::Array(keys.iter().map(shown).collect()));
                } else {
                    println!("{:<22} {:<20} {:<7} buckets", "access key", "name", "create");
                    for k in &keys {
                        println!(
                            "{:<22} {:<20} {:<7} {}",
                            k.access_key,
                            k.name,
                            if k.create_bucket { "yes" } else { "no" },
                            grants_text(k)
                        );
                    }
                }
            }
            KeyCmd::Allow { access_key, bucket, permission, target } => {
                let k = access_keys::grant(&client(&target)?, &access_key, &bucket, Some(permission)).await?;
                println!("{}: {}", k.access_key, grants_text(&k));
            }
            KeyCmd::Deny { access_key, bucket, target } => {
                let k = access_keys::grant(&client(&target)?, &access_key, &bucket, None).await?;
                println!("{}: {}", k.access_key, grants_text(&k));
            }
            KeyCmd::Revoke { access_key, target } => {
                access_keys::revoke(&client(&target)?, &access_key).await.map_err(|e| anyhow!(e))?;
                println!("{access_key} revoked");
            }
            KeyCmd::Master { file, id } => {
                let id = id.unwrap_or_else(|| format!("k{}", kintsugi_s3::object_meta::now_ms() / 1000));
                let existed = file.exists();
                kintsugi_s3::sse::MasterKeys::rotate(&file, &id)?;
                if existed {
                    println!("{}: key '{id}' put first; restart the gateways, then `kintsugi key rewrap`", file.display());
                } else {
                    println!("{}: made with key '{id}'; keep a copy, encrypted objects cannot be read without it", file.display());
                }
            }
            KeyCmd::Rewrap { sse_key_file, target } => {
                let keys = kintsugi_s3::sse::MasterKeys::load(&sse_key_file)?;
                let quiet = target.json;
                let show = |r: &kintsugi_s3::sse::rotation::Rewrapped| {
                    if !quiet {
                        eprintln!("scanned {} versions: {} re-wrapped, {} already current", r.scanned, r.rewrapped, r.current);
                    }
                };
                let r = kintsugi_s3::sse::rotation::rewrap(&client(&target)?, &keys, &show).await?;
                if target.json {
                    println!("{}", serde_json::to_string(&r)?);
                } else {
                    println!(
                        "{} data keys re-wrapped with '{}', {} were already; {} versions scanned",
                        r.rewrapped,
                        keys.current().0,
                        r.current,
                        r.scanned
                    );
                }
                if !r.unopenable.is_empty() {
                    anyhow::bail!("{} objects could not be opened with the file's keys: {}", r.unopenable.len(), r.unopenable.join("; "));
                }
            }
        }
        Ok(())
    })
}
