//! The command line's shape (clap): every subcommand and option with its
//! help text. `main.rs` runs them; `redmark completions` and `redmark man`
//! render this same definition, so they cannot drift from it.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use redmark::telemetry::logging::{LogColor, LogFormat};

/// redmark: an MCP gateway that lets 2026-07-28 hosts use legacy MCP servers,
/// including the questions (elicitations) those servers push mid-call.
#[derive(Parser)]
#[command(version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Log format on stderr (filter with RUST_LOG, e.g. RUST_LOG=redmark=debug).
    #[arg(long, global = true, value_enum, default_value = "human")]
    pub log_format: LogFormat,
    /// Colour in the human log format: auto (only when stderr is a terminal), always, never.
    #[arg(long, global = true, value_enum, default_value = "auto")]
    pub log_color: LogColor,
    #[command(subcommand)]
    pub command: Command,
}

/// `redmark --version`: the release and the commit it was built from (by
/// build.rs; a build outside git without `.cargo_vcs_info.json` has none).
pub const VERSION: &str = match option_env!("REDMARK_COMMIT") {
    Some(_) => concat!(
        env!("CARGO_PKG_VERSION"),
        " (commit ",
        env!("REDMARK_COMMIT"),
        ")"
    ),
    None => env!("CARGO_PKG_VERSION"),
};

#[derive(Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve {
        /// The gateway config file (TOML).
        #[arg(long, short)]
        config: PathBuf,
        /// Listen here instead of `[server] listen` (port 0 picks a free port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Serve the admin endpoints here instead of `[server] admin`.
        #[arg(long)]
        admin: Option<SocketAddr>,
    },
    /// Check a config file and exit: 0 when clean, 1 on any error, 2 on warnings only; each problem as file:line:column.
    Check {
        /// The gateway config file (TOML) to check.
        #[arg(long, short)]
        config: PathBuf,
        /// Also start each upstream, list its tools and prompts, and check the policy's tool sections against them.
        #[arg(long)]
        probe: bool,
    },
    /// Print the SHA-256 to put in `[[auth.api_key]] sha256` for an API key read from stdin.
    HashKey,
    /// Print a new random key for sealing requestState, and the config that uses it.
    Keygen {
        /// The key id (appears in every state sealed with it; rotate by adding a new id).
        #[arg(long, default_value = "k1")]
        id: String,
    },
    /// Reload the running gateway's redmark.toml (POST /reload on its loopback admin listener; SIGHUP does the same).
    Reload {
        /// The admin listener, e.g. http://127.0.0.1:9464.
        #[arg(long, default_value = "http://127.0.0.1:9464")]
        admin: String,
    },
    /// Report what the questions cost people, per tool, from the audit log.
    Report {
        /// The `[audit] path` file; its rotated files (FILE.1, FILE.2, ...) are read too. Repeatable.
        #[arg(long, required = true)]
        audit: Vec<PathBuf>,
        /// Output: aligned text, JSON, CSV, or one self-contained HTML page.
        #[arg(long, value_enum, default_value = "table")]
        format: redmark::telemetry::report::Format,
        /// Only questions since: a duration back from now (24h, 7d) or an RFC 3339 UTC time.
        #[arg(long)]
        since: Option<String>,
        /// Rows per tool, or per tool and origin (`native`: a 2026-07-28 server's own
        /// questions; `converted`: a legacy server's pushes).
        #[arg(long, value_enum, default_value = "tool")]
        by: redmark::telemetry::report::By,
        #[command(flatten)]
        thresholds: redmark::telemetry::suggest::Thresholds,
    },
    /// Print the JSON Schema of redmark.toml (or of a policy file), for editors and CI.
    ConfigSchema {
        /// The schema of a policy file (`[[route]] policy`) instead of redmark.toml.
        #[arg(long)]
        policy: bool,
        /// Print the reference page (Markdown) made from the schema instead.
        #[arg(long)]
        markdown: bool,
    },
    /// Print a shell completion script: `source <(redmark completions bash)`.
    Completions {
        /// The shell to complete in.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `redmark man > redmark.1; man ./redmark.1`.
    Man,
}

/// The man page, as `docs/man/redmark.1` ships it: one page with every
/// subcommand's options (clap_mangen alone lists subcommands as pages of
/// their own), and the release without the commit, so the file changes only
/// when the CLI does.
pub fn man_page() -> String {
    use clap::CommandFactory;
    let cmd = Cli::command().version(env!("CARGO_PKG_VERSION"));
    let man = clap_mangen::Man::new(cmd.clone());
    let mut out = Vec::new();
    // Rendering into a Vec cannot fail.
    let _ = (|| -> std::io::Result<()> {
        man.render_title(&mut out)?;
        man.render_name_section(&mut out)?;
        man.render_synopsis_section(&mut out)?;
        man.render_description_section(&mut out)?;
        man.render_options_section(&mut out)?;
        render_subcommands(&cmd, "redmark", &mut out)?;
        man.render_version_section(&mut out)
    })();
    String::from_utf8_lossy(&out).into_owned()
}

/// Each subcommand as a section: what it does, its synopsis, its options.
fn render_subcommands(cmd: &clap::Command, prefix: &str, out: &mut Vec<u8>) -> std::io::Result<()> {
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{prefix} {}", sub.get_name());
        let sub = sub.clone().bin_name(name.clone());
        let man = clap_mangen::Man::new(sub.clone());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        if sub.get_arguments().any(|a| !a.is_hide_set()) {
            man.render_options_section(&mut part)?;
        }
        let about = sub
            .get_about()
            .map(|a| format!(".PP\n{a}\n"))
            .unwrap_or_default();
        let part = String::from_utf8_lossy(&part)
            .replacen(
                ".SH SYNOPSIS\n",
                &format!(".SH \"{}\"\n{about}.PP\n", name.to_uppercase()),
                1,
            )
            .replacen(".SH OPTIONS", ".SS Options", 1);
        out.extend_from_slice(part.as_bytes());
    }
    Ok(())
}
