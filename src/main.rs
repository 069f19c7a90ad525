//! The `redmark` command: parse the command line, load the config, set up
//! logging, and hand over to the library.

use std::io::Read;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use redmark::config::Config;
use redmark::telemetry::logging::{self, LogStyle};

mod cli;
use cli::{Cli, Command};

/// jemalloc, not glibc's malloc: after a burst (thousands of waiting
/// questions answered or expired) it hands the freed pages back within
/// seconds (background purging), where glibc's per-thread arenas kept the
/// peak. Measured by `scripts/soak.sh`. Its options are compiled in from
/// `.cargo/config.toml`.
#[cfg(all(not(target_env = "msvc"), not(feature = "system-allocator")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's own counters for `/metrics` (`redmark_allocator_bytes`): they
/// tell live objects (`allocated`) from pages it holds (`resident`), which
/// RSS alone cannot. Cached by jemalloc until the epoch advances.
#[cfg(all(not(target_env = "msvc"), not(feature = "system-allocator")))]
fn jemalloc_stats() -> Option<redmark::telemetry::metrics::AllocatorStats> {
    use tikv_jemalloc_ctl::{epoch, stats};
    epoch::advance().ok()?;
    let bytes = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    Some(redmark::telemetry::metrics::AllocatorStats {
        allocated: bytes(stats::allocated::read().ok()?),
        active: bytes(stats::active::read().ok()?),
        resident: bytes(stats::resident::read().ok()?),
        retained: bytes(stats::retained::read().ok()?),
        metadata: bytes(stats::metadata::read().ok()?),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(all(not(target_env = "msvc"), not(feature = "system-allocator")))]
    redmark::telemetry::metrics::read_allocator_stats_with(jemalloc_stats);
    let style = LogStyle {
        format: cli.log_format,
        color: cli.log_color,
    };
    // `serve` sets up logging together with trace export, inside its runtime.
    if !matches!(cli.command, Command::Serve { .. }) {
        logging::init(style);
    }
    match cli.command {
        Command::ConfigSchema { policy, markdown } => {
            print!("{}", config_schema(policy, markdown));
            ExitCode::SUCCESS
        }
        Command::Completions { shell } => {
            use clap::CommandFactory;
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "redmark",
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Command::Man => {
            print!("{}", cli::man_page());
            ExitCode::SUCCESS
        }
        Command::Check { config, probe } => check(&config, probe),
        Command::Reload { admin } => reload(&admin),
        Command::HashKey => {
            let mut key = String::new();
            if std::io::stdin().read_to_string(&mut key).is_err() || key.trim().is_empty() {
                eprintln!(
                    "write the API key on stdin, e.g.: printf %s \"$KEY\" | redmark hash-key"
                );
                return ExitCode::FAILURE;
            }
            println!("{}", redmark::config::key_digest_hex(key.trim()));
            ExitCode::SUCCESS
        }
        Command::Keygen { id } => {
            let var = format!(
                "REDMARK_STATE_KEY_{}",
                id.to_ascii_uppercase()
                    .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
            );
            println!("# Put the secret in the environment of every redmark replica:");
            println!("{var}={}", redmark::mrtr::state::generate_secret());
            println!();
            println!("# and this in the config (on rotation, keep the old key without `sign`):");
            println!("[[state.keys]]\nid = \"{id}\"\nsecret_env = \"{var}\"\nsign = true");
            ExitCode::SUCCESS
        }
        Command::Report {
            audit,
            format,
            since,
            by,
            thresholds,
        } => match redmark::telemetry::report::run_with(
            &audit,
            since.as_deref(),
            format,
            by,
            &thresholds,
        ) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("redmark report: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Serve {
            config,
            listen,
            admin,
        } => match serve(config, listen, admin, style) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("redmark: {e:#}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `redmark config-schema`: the JSON Schema, or the reference page made from it.
fn config_schema(policy: bool, markdown: bool) -> String {
    use redmark::config::{reference, schema};
    let (json, page) = if policy {
        (redmark::policy::policy_schema(), reference::Page::Policy)
    } else {
        (schema::config_schema(), reference::Page::Config)
    };
    if markdown {
        reference::markdown(&json, page)
    } else {
        schema::to_pretty_json(&json)
    }
}

/// `redmark reload`: asks the running gateway to reload its config file.
fn reload(admin: &str) -> ExitCode {
    let url = format!("{}/reload", admin.trim_end_matches('/'));
    let sent = tokio::runtime::Runtime::new().map(|rt| {
        rt.block_on(async {
            // The admin listener takes a reload only as JSON (a type a
            // browser cannot send cross-origin without a preflight).
            let resp = reqwest::Client::new()
                .post(&url)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body("{}")
                .send()
                .await?;
            let status = resp.status();
            Ok::<_, reqwest::Error>((status, resp.text().await?))
        })
    });
    match sent {
        Ok(Ok((status, body))) => {
            println!("{}", body.trim_end());
            if status.is_success() {
                ExitCode::SUCCESS
            } else {
                eprintln!("redmark reload: {url}: {status}");
                ExitCode::FAILURE
            }
        }
        Ok(Err(e)) => {
            eprintln!("redmark reload: {url}: {e}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("redmark reload: cannot start the async runtime: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `redmark check`: errors and warnings, then the exit code that sums them up.
fn check(path: &std::path::Path, probe: bool) -> ExitCode {
    let c = match Config::load(path) {
        Ok(c) => c,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::FAILURE;
        }
    };
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let (mut findings, lints) = redmark::app::checks::offline(&c, &text, &file);
    if probe {
        match tokio::runtime::Runtime::new() {
            Ok(rt) => rt.block_on(redmark::app::checks::probe(
                &c,
                &file,
                &lints,
                &mut findings,
            )),
            Err(e) => {
                eprintln!("redmark check --probe: cannot start the async runtime: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    for e in &findings.errors {
        eprintln!("{e}");
    }
    for w in &findings.warnings {
        eprintln!("{}:{}:{}: warning: {}", w.file, w.line, w.column, w.message);
    }
    match findings.exit_code() {
        0 => {
            println!("{}: ok ({} route(s))", path.display(), c.routes.len());
            ExitCode::SUCCESS
        }
        code => ExitCode::from(code),
    }
}

fn serve(
    path: PathBuf,
    listen: Option<SocketAddr>,
    admin: Option<SocketAddr>,
    log_style: LogStyle,
) -> anyhow::Result<()> {
    let config = Config::load(&path);
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    // Logs and traces first, so a broken config is reported through them too.
    let telemetry = match &config {
        Ok(c) => c.telemetry.clone(),
        Err(_) => Default::default(),
    };
    let _telemetry =
        runtime.block_on(async { redmark::telemetry::traces::init(&telemetry, log_style) })?;
    let mut config = config.map_err(|e| anyhow::anyhow!("{e}"))?;
    redmark::config::compat::log(&config.deprecations);
    if let Some(addr) = listen {
        config.server.listen = toml::Spanned::new(0..0, addr.to_string());
    }
    if let Some(addr) = admin {
        config.server.admin = Some(toml::Spanned::new(0..0, addr.to_string()));
    }
    let running_config = config.clone();
    runtime.block_on(async move {
        let mut running = redmark::start(config).await?;
        running.enable_reload(path, listen, admin, running_config);
        // Tests and scripts read the bound address from this line.
        println!("redmark listening on http://{}", running.addr);
        if let Some(admin) = running.admin_addr {
            println!("redmark admin on http://{admin}");
        }
        if let Some(internal) = running.cluster_addr {
            println!("redmark cluster on http://{internal}");
        }
        let stop = running.take_stop();
        tokio::spawn(async move {
            wait_for_signal().await;
            if let Some(stop) = stop {
                let _ = stop.send(());
            }
        });
        running.wait().await;
        Ok(())
    })
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            let _ = ctrl_c.await;
            return;
        };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// `--help` is the first manual a user reads: an option listed without a word
/// of help (as `check -c, --config` once was) sends them to the source.
#[cfg(test)]
mod help_tests {
    use clap::CommandFactory;

    /// Every subcommand (at any depth) has an about line and every argument of
    /// every command has help text; returns what lacks it, as paths.
    fn missing_help(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for arg in cmd.get_arguments().filter(|a| !a.is_hide_set()) {
            if arg.get_help().is_none() && arg.get_long_help().is_none() {
                missing.push(format!("{path} --{}", arg.get_id()));
            }
        }
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            let sub_path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() && sub.get_long_about().is_none() {
                missing.push(sub_path.clone());
            }
            missing_help(sub, &sub_path, missing);
        }
    }

    #[test]
    fn every_subcommand_and_option_has_help_text() {
        let mut cmd = super::Cli::command();
        // Builds the generated --help/--version args and propagates the
        // global options into each subcommand, so they are walked too.
        cmd.build();
        let mut missing = Vec::new();
        missing_help(&cmd, "redmark", &mut missing);
        assert!(missing.is_empty(), "no help text: {missing:#?}");
        // The walk reaches every subcommand's own options.
        let check = cmd.find_subcommand("check").unwrap();
        assert!(check.get_arguments().any(|a| a.get_id() == "config"));
    }
}

#[cfg(all(test, not(target_env = "msvc"), not(feature = "system-allocator")))]
mod tests {
    /// The options in `.cargo/config.toml` reached jemalloc's build: a
    /// build that skipped them would quietly run with the defaults.
    #[test]
    fn jemalloc_was_built_with_the_projects_options() {
        let options = tikv_jemalloc_ctl::config::malloc_conf::read().unwrap_or_default();
        assert!(
            // tikv-jemalloc-ctl 0.7 keeps the C string's NUL in the `&str`.
            options
                .trim_end_matches('\0')
                .split(',')
                .any(|option| option == "tcache_gc_incr_bytes:4194304"),
            "jemalloc's compiled-in options: {options:?}"
        );
    }
}
