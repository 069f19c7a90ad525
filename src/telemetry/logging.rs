//! Log lines: `RUST_LOG`-style filters, human format on a terminal, JSON lines
//! with `--log-format json`.

use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// The log layer on stderr, filtered by `RUST_LOG` (default `info`).
pub fn fmt_layer<S>(format: LogFormat) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let base = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    match format {
        LogFormat::Human => base.with_filter(filter).boxed(),
        LogFormat::Json => base.json().flatten_event(true).with_filter(filter).boxed(),
    }
}

/// Logging only (commands that do not serve). A second call is a no-op.
pub fn init(format: LogFormat) {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let _ = tracing_subscriber::registry()
        .with(fmt_layer(format))
        .try_init();
}
