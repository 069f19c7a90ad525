//! The report as one self-contained HTML page (`redmark report --format
//! html`, and `/report` on the admin listener): inline CSS and SVG, nothing
//! fetched, no script. Semantic HTML (landmarks, headings, tables with
//! captions); every bar has its number written beside it and a text
//! alternative, and the parts of a bar differ by pattern as well as colour,
//! so the page reads without colour and with a screen reader.

use std::fmt::Write as _;

use super::report::{ATTENTION_RULE, Report, ToolCost};
use super::report_text::hours_cell;
use super::visible::{is_unsafe, push_escape};

/// `&`, `<`, `>`, `"` and `'` escaped for text and attribute values, and
/// the characters that act rather than show written as `\uXXXX`, as in the
/// text report ([`super::visible`]): a bidi override in a name would reorder
/// what the page reads as, a policy line included.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if is_unsafe(c) => push_escape(&mut out, c),
            c => out.push(c),
        }
    }
    out
}

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;margin:0;color:#111;background:#fff}\
main{max-width:60rem;margin:0 auto;padding:1rem}\
h1{font-size:1.6rem}h2{font-size:1.25rem;margin-top:2rem;border-bottom:1px solid #999}\
table{border-collapse:collapse;width:100%}th,td{padding:.25rem .5rem;border-bottom:1px solid #ccc;text-align:left}\
td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}\
figure{margin:1rem 0}figcaption{font-weight:bold}\
.bar{display:flex;align-items:center;gap:.75rem;margin:.25rem 0}.bar svg{flex:none}\
.legend span{margin-right:1rem}pre{background:#f4f4f4;padding:.5rem;border:1px solid #ccc;overflow-x:auto}\
ol.suggestions>li{margin-bottom:1.25rem}.note{color:#333;font-size:.9rem}";

/// Fills by pattern (and colour): solid, hatched, dotted.
const DEFS: &str = "<svg width=\"0\" height=\"0\" aria-hidden=\"true\" focusable=\"false\" style=\"position:absolute\"><defs>\
<pattern id=\"p-redundant\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
<rect width=\"6\" height=\"6\" fill=\"#f3c6c6\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#8b0000\" stroke-width=\"3\"/></pattern>\
<pattern id=\"p-unanswered\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\">\
<rect width=\"6\" height=\"6\" fill=\"#fff\"/><circle cx=\"3\" cy=\"3\" r=\"1.5\" fill=\"#333\"/></pattern>\
</defs></svg>";

const BAR_W: f64 = 320.0;

/// One `<svg>` bar of `parts` (value, fill, name) scaled to `max`.
fn bar(parts: &[(f64, &str, &str)], max: f64, label: &str) -> String {
    let mut svg = format!(
        "<svg width=\"{}\" height=\"18\" role=\"img\" aria-label=\"{}\"><rect x=\"0\" y=\"0\" width=\"{}\" height=\"18\" fill=\"none\" stroke=\"#999\"/>",
        BAR_W + 2.0,
        esc(label),
        BAR_W + 2.0
    );
    let mut x = 1.0;
    for (v, fill, name) in parts {
        let w = if max > 0.0 { v / max * BAR_W } else { 0.0 };
        if w > 0.0 {
            let _ = write!(
                svg,
                "<rect x=\"{x:.1}\" y=\"1\" width=\"{w:.1}\" height=\"16\" fill=\"{fill}\" stroke=\"#111\" stroke-width=\"0.5\"><title>{}</title></rect>",
                esc(name)
            );
        }
        x += w;
    }
    svg.push_str("</svg>");
    svg
}

fn tool_name(t: &ToolCost) -> String {
    format!("{} / {}", t.route, t.tool)
}

fn attention(out: &mut String, r: &Report) {
    out.push_str("<section aria-labelledby=\"attention\"><h2 id=\"attention\">Attention per tool</h2>\
<p class=\"legend\"><span>■ useful (solid)</span><span>▨ redundant: the value was already in the call's arguments (hatched)</span><span>⁘ unanswered: someone saw it, nobody answered (dotted)</span></p>");
    let max = r
        .tools
        .iter()
        .map(|t| t.attention_hours)
        .fold(0.0, f64::max);
    if r.tools.is_empty() {
        out.push_str("<p>No questions in this window.</p>");
    }
    out.push_str("<ul class=\"bars\" role=\"list\">");
    for t in &r.tools {
        let useful = (t.attention_hours - t.redundant_hours - t.unanswered_hours).max(0.0);
        let text = format!(
            "{}: {} in all; useful {}, redundant {}, unanswered {} ({} questions)",
            tool_name(t),
            hours_cell(t.attention_hours),
            hours_cell(useful),
            hours_cell(t.redundant_hours),
            hours_cell(t.unanswered_hours),
            t.asked
        );
        let svg = bar(
            &[
                (useful, "#2b5d8a", "useful"),
                (t.redundant_hours, "url(#p-redundant)", "redundant"),
                (t.unanswered_hours, "url(#p-unanswered)", "unanswered"),
            ],
            max,
            &text,
        );
        let _ = write!(
            out,
            "<li class=\"bar tool\">{svg}<span>{}</span></li>",
            esc(&text)
        );
    }
    out.push_str("</ul></section>");
}

fn simple_bars(out: &mut String, id: &str, title: &str, rows: &[(String, f64, String)]) {
    let _ = write!(
        out,
        "<section aria-labelledby=\"{id}\"><h2 id=\"{id}\">{}</h2><ul class=\"bars\" role=\"list\">",
        esc(title)
    );
    let max = rows.iter().map(|r| r.1).fold(0.0, f64::max);
    if rows.is_empty() {
        out.push_str("<li>Nothing in this window.</li>");
    }
    for (label, v, text) in rows {
        let line = format!("{label}: {text}");
        let svg = bar(&[(*v, "#2b5d8a", label)], max, &line);
        let _ = write!(
            out,
            "<li class=\"bar\">{svg}<span>{}</span></li>",
            esc(&line)
        );
    }
    out.push_str("</ul></section>");
}

fn table(out: &mut String, r: &Report) {
    out.push_str("<section aria-labelledby=\"numbers\"><h2 id=\"numbers\">The numbers</h2><table><caption>Questions per tool, most attention first</caption><thead><tr>\
<th scope=\"col\">route / tool</th><th scope=\"col\" class=\"n\">asked</th><th scope=\"col\" class=\"n\">median s</th><th scope=\"col\" class=\"n\">unanswered %</th>\
<th scope=\"col\" class=\"n\">declined %</th><th scope=\"col\" class=\"n\">redundant %</th><th scope=\"col\" class=\"n\">attention h:mm:ss</th></tr></thead><tbody>");
    for t in r.tools.iter().chain([&r.total]) {
        let name = if t.tool == "TOTAL" {
            "total".to_owned()
        } else {
            tool_name(t)
        };
        let _ = write!(
            out,
            "<tr><th scope=\"row\">{}</th><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.1}</td><td class=\"n\">{:.1}</td><td class=\"n\">{}</td></tr>",
            esc(&name),
            t.asked,
            t.median_s.map_or_else(|| "-".into(), |s| format!("{s:.1}")),
            t.unanswered_pct,
            t.declined_pct,
            t.redundant_pct,
            hours_cell(t.attention_hours)
        );
    }
    let _ = write!(
        out,
        "</tbody></table><p class=\"note\">{}</p></section>",
        esc(ATTENTION_RULE)
    );
}

fn suggestions(out: &mut String, r: &Report) {
    out.push_str("<section aria-labelledby=\"suggestions\"><h2 id=\"suggestions\">Suggestions, most attention saved first</h2>");
    if r.suggestions.is_empty() {
        let _ = write!(
            out,
            "<p>None: no rule met its threshold on at least {} questions.</p>",
            r.thresholds.min_sample
        );
    } else {
        out.push_str("<ol class=\"suggestions\">");
        for s in &r.suggestions {
            let _ = write!(
                out,
                "<li class=\"suggestion\"><h3>{} / {}: saves {} (h:mm:ss)</h3><p>{}</p><p><strong>Evidence:</strong> {}</p>",
                esc(&s.route),
                esc(&s.tool),
                hours_cell(s.hours_saved),
                esc(&s.change),
                esc(&s.evidence)
            );
            if !s.policy.is_empty() {
                let _ = write!(
                    out,
                    "<p>Add to the route's policy file:</p><pre><code>{}</code></pre>",
                    // Line by line: the newlines between them are the page's.
                    s.policy
                        .iter()
                        .map(|l| esc(l))
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
            out.push_str("</li>");
        }
        out.push_str("</ol>");
    }
    out.push_str("</section>");
}

/// The whole page.
pub fn page(r: &Report) -> String {
    let mut out = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>redmark: what the questions cost people</title><style>",
    );
    out.push_str(STYLE);
    out.push_str("</style></head><body>");
    out.push_str(DEFS);
    out.push_str("<main><h1>What the questions cost people</h1>");
    let window = r.since.as_ref().map_or_else(
        || "the whole audit log".to_owned(),
        |s| format!("since {s}"),
    );
    let _ = write!(
        out,
        "<p id=\"summary\">{} questions in {} operations, {}: {} (h:mm:ss) of people's attention, {} of it on values the call already carried, {} on questions nobody answered.</p>",
        r.total.asked,
        r.total.operations,
        esc(&window),
        hours_cell(r.total.attention_hours),
        hours_cell(r.total.redundant_hours),
        hours_cell(r.total.unanswered_hours)
    );
    if r.truncated {
        out.push_str("<p class=\"note\">Only the newest part of the audit log was read (a size bound); older questions are not counted.</p>");
    }
    suggestions(&mut out, r);
    attention(&mut out, r);
    let times: Vec<(String, f64, String)> = r
        .answer_times
        .iter()
        .map(|b| {
            #[allow(clippy::cast_precision_loss)]
            let v = b.count as f64;
            (b.label.to_owned(), v, format!("{} answers", b.count))
        })
        .collect();
    simple_bars(
        &mut out,
        "answer-times",
        "How long people took to answer",
        &times,
    );
    let days: Vec<(String, f64, String)> = r
        .days
        .iter()
        .map(|d| {
            (
                d.date.clone(),
                d.attention_hours,
                format!(
                    "{} (h:mm:ss), {} questions",
                    hours_cell(d.attention_hours),
                    d.asked
                ),
            )
        })
        .collect();
    simple_bars(&mut out, "trend", "Day by day", &days);
    table(&mut out, r);
    out.push_str("</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::report::{By, build};
    use crate::telemetry::suggest::Thresholds;

    #[test]
    fn escapes_what_the_log_holds() {
        assert_eq!(
            esc("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }

    #[test]
    fn an_empty_page_says_so_and_fetches_nothing() {
        let r = build(&[], By::Tool, None, Vec::new(), 0, &Thresholds::default()).unwrap();
        let html = page(&r);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.contains("No questions in this window."));
        assert!(html.contains("None: no rule met its threshold"));
        for fetch in ["src=", "href=", "url(http", "@import", "<script"] {
            assert!(!html.contains(fetch), "{fetch} in {html}");
        }
    }
}
