//! `kintsugi config check FILE`: reads a coordinator's, a node's or an S3 gateway's TOML as the service
//! would, refuses what the service would refuse at start, and prints the effective
//! configuration (every default filled in).

use crate::gateway_config::GatewayConfig;
use crate::service_cmd::{check_coordinator, check_node};
use anyhow::{bail, Context, Result};
use clap::{Subcommand, ValueEnum};
use kintsugi_coord::CoordConfig;
use kintsugi_node::NodeConfig;
use std::path::PathBuf;

#[derive(Subcommand, Debug)]
pub enum ConfigCmd {
    /// Check a TOML configuration and print it with its defaults filled in; exits non-zero,
    /// saying why, if the service would not start with it.
    Check {
        file: PathBuf,
        /// Whose configuration it is [default: the one it parses as].
        #[arg(long)]
        role: Option<Role>,
        /// Print the effective configuration as JSON instead of TOML.
        #[arg(long)]
        json: bool,
    },
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Coordinator,
    Node,
    /// The S3 gateway (`kintsugi s3 --config`).
    S3,
}

pub fn run(c: ConfigCmd) -> Result<()> {
    let ConfigCmd::Check { file, role, json } = c;
    let text = std::fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
    let as_coord = || toml::from_str::<CoordConfig>(&text);
    let as_node = || toml::from_str::<NodeConfig>(&text);
    let as_s3 = || toml::from_str::<GatewayConfig>(&text);
    let role = match role {
        Some(r) => r,
        None => match (as_coord(), as_node(), as_s3()) {
            (Ok(_), Err(_), Err(_)) => Role::Coordinator,
            (Err(_), Ok(_), Err(_)) => Role::Node,
            (Err(_), Err(_), Ok(_)) => Role::S3,
            (Err(c), Err(n), Err(s)) => bail!(
                "{} is neither a coordinator's configuration ({}), nor a node's ({}), nor an S3 gateway's ({})",
                file.display(),
                c.message(),
                n.message(),
                s.message()
            ),
            _ => bail!("{} reads as the configuration of more than one role: say which with --role", file.display()),
        },
    };
    let what = |e: toml::de::Error| anyhow::anyhow!("{} is not a valid {role:?} configuration: {e}", file.display());
    let (effective, as_json) = match role {
        Role::Coordinator => {
            let cfg = as_coord().map_err(what)?;
            check_coordinator(&cfg)?;
            check_closed(&cfg.listen, cfg.secret_file.is_some(), cfg.insecure)?;
            (toml::to_string_pretty(&cfg)?, serde_json::to_string_pretty(&cfg)?)
        }
        Role::Node => {
            let cfg = as_node().map_err(what)?;
            check_node(&cfg)?;
            check_closed(&cfg.listen, cfg.secret_file.is_some(), cfg.insecure)?;
            crate::service_cmd::check_advertise(&cfg)?;
            (toml::to_string_pretty(&cfg)?, serde_json::to_string_pretty(&cfg)?)
        }
        Role::S3 => {
            let cfg = as_s3().map_err(what)?;
            cfg.resolve().map_err(|e| anyhow::anyhow!("the gateway would refuse to start: {e}"))?;
            (toml::to_string_pretty(&cfg)?, serde_json::to_string_pretty(&cfg)?)
        }
    };
    if json {
        println!("{as_json}");
    } else {
        eprintln!("{}: a valid {} configuration; in effect:", file.display(), format!("{role:?}").to_lowercase());
        print!("{effective}");
    }
    Ok(())
}

/// Refuses, as the service would at start, to serve beyond loopback without a secret: the
/// TOML's `secret_file`, or one given to this command (`--secret-file`,
/// KINTSUGI_SECRET_FILE), as the service would be given it.
fn check_closed(listen: &str, in_toml: bool, insecure: bool) -> Result<()> {
    let given = kintsugi_proto::auth::secret().is_some();
    match crate::service_cmd::refuses_open(listen, in_toml || given, insecure) {
        Some(why) => bail!("the service would refuse to start: {why}"),
        None => Ok(()),
    }
}
