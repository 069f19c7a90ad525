//! The fixture's prompts, resources and completions.

use rmcp::{ErrorData, model::*};
use serde_json::{Value, json};

use super::ask::Ask;
use super::{PNG, result};

pub fn prompts() -> ListPromptsResult {
    let arg = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    result(json!({"prompts": [
        {"name": "test_simple_prompt", "description": "A simple prompt without arguments"},
        {"name": "test_prompt_with_arguments", "description": "A prompt with two arguments",
         "arguments": [arg("arg1", "First test argument"), arg("arg2", "Second test argument")]},
        {"name": "test_prompt_with_embedded_resource", "description": "A prompt that embeds a resource",
         "arguments": [arg("resourceUri", "URI of the resource to embed")]},
        {"name": "test_prompt_with_image", "description": "A prompt with an image"},
        {"name": "test_input_required_result_prompt",
         "description": "Asks the user for context (elicitation/create) before it is built"},
    ]}))
}

fn user(content: Value) -> Value {
    json!({"role": "user", "content": content})
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

pub async fn prompt(
    request: &GetPromptRequestParams,
    ask: &Ask<'_>,
) -> Result<GetPromptResult, ErrorData> {
    let args = request.arguments.clone().unwrap_or_default();
    let arg = |name: &str| match args.get(name) {
        Some(Value::String(s)) => Ok(s.clone()),
        _ => Err(ErrorData::invalid_params(
            format!("argument `{name}` is required"),
            None,
        )),
    };
    let messages = match request.name.as_ref() {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => {
            let said = format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1")?,
                arg("arg2")?
            );
            vec![user(text(&said))]
        }
        "test_prompt_with_embedded_resource" => vec![
            user(
                json!({"type": "resource", "resource": {"uri": arg("resourceUri")?,
                "mimeType": "text/plain", "text": "Embedded resource content for testing."}}),
            ),
            user(text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(text("Please analyze the image above.")),
        ],
        "test_input_required_result_prompt" => {
            let message = "What context should the prompt use?";
            let answer = ask
                .elicit_a("user_context", message, "context", "string")
                .await;
            let answer = answer.map_err(|why| ErrorData::internal_error(why, None))?;
            let context = answer.pointer("/content/context").and_then(Value::as_str);
            let context = context.unwrap_or("(none given)");
            vec![user(text(&format!("Use this context: {context}")))]
        }
        other => {
            let unknown = format!("Unknown prompt: {other}");
            return Err(ErrorData::invalid_params(unknown, None));
        }
    };
    Ok(result(json!({ "messages": messages })))
}

pub fn resources() -> ListResourcesResult {
    result(json!({"resources": [
        {"uri": "test://static-text", "name": "static-text", "mimeType": "text/plain",
         "description": "A static text resource"},
        {"uri": "test://static-binary", "name": "static-binary", "mimeType": "image/png",
         "description": "A static binary resource (a 1x1 PNG)"},
    ]}))
}

pub fn templates() -> ListResourceTemplatesResult {
    result(json!({"resourceTemplates": [
        {"uriTemplate": "test://template/{id}/data", "name": "template-data",
         "mimeType": "application/json", "description": "Data for an id"},
    ]}))
}

/// A resource by URI. An unknown URI is the 2025-11-25 "Resource not found"
/// error (-32002) with the URI in `data`; redmark turns the code into the
/// 2026-07-28 one.
pub fn read(uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let contents = match uri {
        "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."}),
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        _ => match uri
            .strip_prefix("test://template/")
            .and_then(|rest| rest.strip_suffix("/data"))
            .filter(|id| !id.is_empty() && !id.contains('/'))
        {
            Some(id) => {
                let data =
                    json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
                json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
            }
            None => {
                let code = rmcp::model::ErrorCode(-32002);
                return Err(ErrorData::new(
                    code,
                    "Resource not found",
                    Some(json!({"uri": uri})),
                ));
            }
        },
    };
    Ok(result(json!({ "contents": [contents] })))
}

/// Completions for `test_prompt_with_arguments`'s `arg1`: the values that
/// start with what was typed.
pub fn complete(request: &CompleteRequestParams) -> CompleteResult {
    let typed = request.argument.value.to_lowercase();
    let values: Vec<&str> = ["paris", "park", "party"]
        .into_iter()
        .filter(|v| v.starts_with(&typed))
        .collect();
    result(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}
