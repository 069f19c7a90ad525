//! Log lines: `RUST_LOG`-style filters, human format on a terminal, JSON lines
//! with `--log-format json`; colour only where a person reads a terminal.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// `--log-color`: ANSI colour in the human format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogColor {
    /// Colour when stderr is a terminal, none when it is a file or a pipe.
    #[default]
    Auto,
    Always,
    Never,
}

impl LogColor {
    pub fn ansi(self) -> bool {
        match self {
            LogColor::Auto => std::io::stderr().is_terminal(),
            LogColor::Always => true,
            LogColor::Never => false,
        }
    }
}

/// How log lines look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogStyle {
    pub format: LogFormat,
    pub color: LogColor,
}

/// The log layer on stderr, filtered by `RUST_LOG` (default `info`).
pub fn fmt_layer<S>(style: LogStyle) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let base = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(style.format == LogFormat::Human && style.color.ansi());
    let format = style.format;
    match format {
        LogFormat::Human => base.with_filter(filter).boxed(),
        LogFormat::Json => base.json().flatten_event(true).with_filter(filter).boxed(),
    }
}

/// Logging only (commands that do not serve). A second call is a no-op.
pub fn init(style: LogStyle) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(fmt_layer(style))
        .try_init();
}
