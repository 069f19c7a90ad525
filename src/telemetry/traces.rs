//! OpenTelemetry traces: OTLP export (HTTP/protobuf or gRPC) configured by
//! `[telemetry]` or the standard `OTEL_*` environment variables, and the W3C
//! trace context that joins every round trip of an operation into one trace.
//!
//! With no exporter configured nothing is exported and spans cost only what
//! `tracing` costs without a subscriber layer for them.

use std::collections::HashMap;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use serde::Deserialize;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::logging::LogStyle;

/// `[telemetry]`: where traces go. Unset fields fall back to the `OTEL_*` variables.
#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// OTLP endpoint, e.g. `http://collector:4318` (HTTP) or `http://collector:4317` (gRPC).
    #[serde(default)]
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (default) or `grpc`.
    #[serde(default)]
    pub otlp_protocol: Option<String>,
    /// `service.name` of the traces (default `OTEL_SERVICE_NAME`, else `redmark`).
    #[serde(default)]
    pub service_name: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("unknown OTLP protocol `{0}`; use `http/protobuf` or `grpc`")]
    Protocol(String),
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
}

/// Flushes and stops trace export when dropped.
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(p) = self.provider.take()
            && let Err(e) = p.shutdown()
        {
            eprintln!("redmark: flushing traces failed: {e}");
        }
    }
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Installs logging (and, when an endpoint is configured, trace export) for
/// the process. Must run inside the Tokio runtime (gRPC export uses it).
pub fn init(config: &TelemetryConfig, style: LogStyle) -> Result<TelemetryGuard, TelemetryError> {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let endpoint = config
        .otlp_endpoint
        .clone()
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
        .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"));
    let fmt = super::logging::fmt_layer(style);
    let Some(endpoint) = endpoint else {
        let _ = tracing_subscriber::registry().with(fmt).try_init();
        return Ok(TelemetryGuard { provider: None });
    };
    let protocol = config
        .otlp_protocol
        .clone()
        .or_else(|| env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"))
        .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_else(|| "http/protobuf".into());
    let mut resource = Resource::builder();
    if let Some(name) = config
        .service_name
        .clone()
        .or_else(|| env("OTEL_SERVICE_NAME"))
    {
        resource = resource.with_service_name(name);
    } else {
        resource = resource.with_service_name("redmark");
    }
    let builder = SdkTracerProvider::builder().with_resource(resource.build());
    let provider = match protocol.as_str() {
        "grpc" => {
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_tonic()
                .with_endpoint(endpoint)
                .build()
                .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            // gRPC export runs on the Tokio runtime.
            let processor = opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio).build();
            builder.with_span_processor(processor).build()
        }
        "http/protobuf" => {
            let url = if endpoint.trim_end_matches('/').ends_with("/v1/traces") {
                endpoint
            } else {
                format!("{}/v1/traces", endpoint.trim_end_matches('/'))
            };
            let exporter = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_endpoint(url)
                .build()
                .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
            builder.with_batch_exporter(exporter).build()
        }
        other => return Err(TelemetryError::Protocol(other.to_owned())),
    };
    let tracer = provider.tracer("redmark");
    // Spans are exported whatever RUST_LOG says about log lines.
    let otel = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_filter(
            tracing_subscriber::filter::Targets::new().with_target("redmark", tracing::Level::INFO),
        );
    let _ = tracing_subscriber::registry()
        .with(fmt)
        .with(otel)
        .try_init();
    Ok(TelemetryGuard {
        provider: Some(provider),
    })
}

/// Makes `span` a child of a W3C `traceparent` (and `tracestate`), when valid.
pub fn adopt_parent(span: &tracing::Span, traceparent: Option<&str>, tracestate: Option<&str>) {
    let Some(tp) = traceparent else { return };
    let mut carrier = HashMap::new();
    carrier.insert("traceparent".to_owned(), tp.to_owned());
    if let Some(ts) = tracestate {
        carrier.insert("tracestate".to_owned(), ts.to_owned());
    }
    let cx = TraceContextPropagator::new().extract(&carrier);
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The W3C `traceparent` of `span`, when it is being traced.
pub fn traceparent(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);
    carrier.remove("traceparent")
}

/// The trace id of `span` (hex), when it is being traced: for log lines.
pub fn trace_id(span: &tracing::Span) -> Option<String> {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    sc.is_valid().then(|| sc.trace_id().to_string())
}
