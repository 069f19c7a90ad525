//! Log lines: `RUST_LOG`-style filters, human format on a terminal, JSON lines
//! with `--log-format json`; colour only where a person reads a terminal.
//!
//! JSON lines carry real JSON types: numbers and booleans as such, a field
//! written with [`json`] (a list of keys, say) as the array or object it is,
//! (anything whose `Debug` is JSON is parsed back), an absent `Option` not at all (never `"Some(..)"` or `""`). Span fields
//! are not repeated on each line: every line about an operation names it.

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
///
/// It sees events only, never spans: every line names what it is about in
/// its own fields, and formatting each span's fields for a log line that may
/// never come was about 27k instructions of every passthrough call at the
/// default level (callgrind; the spans are for traces). So a `RUST_LOG`
/// directive that selects by span (`[operation]=debug`) matches nothing.
pub fn fmt_layer<S>(style: LogStyle) -> Box<dyn Layer<S> + Send + Sync>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
{
    use tracing_subscriber::filter::{FilterExt, filter_fn};
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info"))
        .and(filter_fn(|m: &tracing::Metadata<'_>| m.is_event()));
    let base = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(style.format == LogFormat::Human && style.color.ansi());
    let format = style.format;
    match format {
        LogFormat::Human => base.with_filter(filter).boxed(),
        LogFormat::Json => base.event_format(JsonLines).with_filter(filter).boxed(),
    }
}

/// A value logged as JSON: `keys = ?json(&keys)` is an array in JSON lines
/// (and reads as one in the human format).
pub fn json<T: serde::Serialize + ?Sized>(value: &T) -> JsonText {
    JsonText(serde_json::to_string(value).unwrap_or_default())
}

/// JSON text whose `Debug` is the text itself.
pub struct JsonText(String);

impl std::fmt::Debug for JsonText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// One JSON object per event: `timestamp`, `level`, `target`, the message
/// and every field, flattened, in the order written.
struct JsonLines;

impl<S, N> tracing_subscriber::fmt::FormatEvent<S, N> for JsonLines
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> tracing_subscriber::fmt::FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &tracing_subscriber::fmt::FmtContext<'_, S, N>,
        mut writer: tracing_subscriber::fmt::format::Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> std::fmt::Result {
        let meta = event.metadata();
        let mut line = serde_json::Map::new();
        line.insert(
            "timestamp".into(),
            humantime::format_rfc3339_micros(std::time::SystemTime::now())
                .to_string()
                .into(),
        );
        line.insert("level".into(), meta.level().as_str().into());
        event.record(&mut JsonFields(&mut line));
        line.insert("target".into(), meta.target().into());
        writeln!(writer, "{}", serde_json::Value::Object(line))
    }
}

struct JsonFields<'m>(&'m mut serde_json::Map<String, serde_json::Value>);

impl tracing::field::Visit for JsonFields<'_> {
    fn record_f64(&mut self, field: &tracing::field::Field, value: f64) {
        let v = serde_json::Number::from_f64(value).map_or_else(
            || serde_json::Value::String(value.to_string()),
            serde_json::Value::Number,
        );
        self.0.insert(field.name().into(), v);
    }

    fn record_i64(&mut self, field: &tracing::field::Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_bool(&mut self, field: &tracing::field::Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        // A list or object written with [`json`] (or whose `Debug` is JSON) stays one.
        let structured =
            field.name() != "message" && (text.starts_with('[') || text.starts_with('{'));
        let v = match structured
            .then(|| serde_json::from_str(&text).ok())
            .flatten()
        {
            Some(v) => v,
            None => text.into(),
        };
        self.0.insert(field.name().into(), v);
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
