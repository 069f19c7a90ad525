//! Per-server scripts and checks of the end-to-end tests: each check asserts
//! what the server received (its own tool result) and what the client saw.

use serde_json::{Value, json};

use super::{Client, Fronted, Output, three_calls};
use crate::common::assert_contains;

// ---------------------------------------------------------------------------
// server-everything: `trigger-elicitation-request` (no arguments) asks for a
// form whose only required field is `name`, and reports the outcome it got.

pub const EVERYTHING_TOOL: &str = "trigger-elicitation-request";

pub fn everything_script() -> Value {
    let accept = json!({"name": "Ada Lovelace", "check": true, "integer": 7});
    let mut script = three_calls(EVERYTHING_TOOL, json!({}), accept);
    script["steps"]
        .as_array_mut()
        .unwrap()
        .insert(0, json!({"op": "list_tools"}));
    script
}

/// Checks `everything_script`'s output: the tool is listed, each call asked
/// one question, and the server received accept (with the content), decline, cancel.
pub async fn everything_outcomes(out: &Output, fronted: &Fronted) {
    let tools = out.tool_names(0);
    assert!(
        tools.iter().any(|t| t == EVERYTHING_TOOL),
        "listed once the client declares elicitation: {tools:?}"
    );
    // No policy: each question gets the first default key.
    let message = "Please provide inputs for the following fields:";
    for q in out.one_question_each(1..=3, message, "elicitation-1") {
        assert_eq!(q["requestedSchema"]["required"], json!(["name"]), "{q}");
        assert_eq!(q["requestedSchema"]["properties"]["name"]["type"], "string");
    }
    let accepted = out.texts(1);
    assert_eq!(
        accepted[0], "✅ User provided the requested information!",
        "{accepted:?}"
    );
    let details = [
        "- Name: Ada Lovelace",
        "- Agreed to terms: true",
        "- Favorite Integer: 7",
    ];
    assert_contains(&accepted[1], &details);
    assert_contains(&accepted[2], &["\"action\": \"accept\""]);

    let declined = out.texts(2);
    assert_eq!(
        declined[0],
        "❌ User declined to provide the requested information."
    );
    assert_contains(&declined[1], &["\"action\": \"decline\""]);
    assert!(!declined.join("\n").contains("Ada"), "{declined:?}");

    let cancelled = out.texts(3);
    assert_eq!(cancelled[0], "⚠️ User cancelled the elicitation dialog.");
    assert_contains(&cancelled[1], &["\"action\": \"cancel\""]);
    for step in 1..=3 {
        assert_ne!(out.result(step)["isError"], true, "{}", out.step(step));
    }
    fronted.counted_three_ways(EVERYTHING_TOOL).await;
}

// ---------------------------------------------------------------------------
// The rooms example: the seed story, and create_ticket's priority question.

pub fn seed_story_script() -> Value {
    json!({
        "steps": [{"op": "call_tool", "name": "book_room",
                   "arguments": {"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}}],
        "elicitation": [
            {"action": "accept", "content": {"room_id": "studio-b"}},
            {"action": "accept", "content": {"choice": "atrium"}},
        ],
    })
}

/// Checks the seed story: "the big room" is ambiguous (asked under `room`),
/// Studio B is taken at 09:00 so the server offers the free rooms (asked
/// under `alternative`), and the booking lands in the Atrium. Returns the booking id.
pub fn seed_story_outcome(out: &Output) -> String {
    let asked = out.asked_in(0);
    assert_eq!(asked.len(), 2, "two questions, one per round: {asked:#?}");
    let (which, instead) = (asked[0], asked[1]);
    assert_eq!(
        which["message"],
        "'the big room' matches more than one room. Which did you mean?"
    );
    assert_eq!(
        which["requestedSchema"]["properties"]["room_id"]["enum"],
        json!(["atrium", "studio-b", "nook"]),
        "{which}"
    );
    assert_eq!(which["requestedSchema"]["required"], json!(["room_id"]));
    assert_eq!(
        instead["message"],
        "Studio B is already booked on 2026-09-17 at 09:00 (bk-1). Book another room instead?"
    );
    assert_eq!(
        instead["requestedSchema"]["properties"]["choice"]["enum"],
        json!(["atrium", "nook", "cancel"]),
        "only the free rooms are offered: {instead}"
    );
    if let (Some(first), Some(second)) = (out.key_of(which), out.key_of(instead)) {
        assert_eq!(
            (first, second),
            ("room", "alternative"),
            "keys named by policies/rooms.toml"
        );
    }
    let booked = out.result(0);
    assert_ne!(booked["isError"], true, "{booked}");
    let sc = &booked["structuredContent"];
    assert_eq!(sc["room_id"], "atrium", "{booked}");
    assert_eq!(sc["day"], "2026-09-17");
    assert_eq!(sc["hour"], 9);
    let id = sc["booking_id"].as_str().expect("booking id").to_owned();
    assert_eq!(
        out.text(0),
        format!("Booked The Atrium (atrium, 24 seats) on 2026-09-17 at 09:00. Booking id: {id}.")
    );
    id
}

/// After the seed story: the server really holds the Atrium booking (it
/// cancels exactly that booking, and only once).
pub async fn seed_story_booking_exists(fronted: &Fronted, client: Client, booking_id: &str) {
    let cancel = json!({"op": "call_tool", "name": "cancel_booking", "arguments": {"booking_id": booking_id}});
    let out = fronted
        .run(
            client,
            &json!({"steps": [cancel, cancel], "elicitation": []}),
        )
        .await;
    assert_eq!(
        out.text(0),
        format!("Cancelled booking {booking_id}: The Atrium on 2026-09-17 at 09:00.")
    );
    assert_eq!(out.result(1)["isError"], true, "{}", out.step(1));
    assert!(out.elicitations().is_empty(), "{:#?}", out.lines);
}

/// bob (not in facilities) tells the seed story's second question "atrium",
/// then gives a ticket priority of 9 before 3.
pub fn policy_script() -> Value {
    json!({
        "steps": [
            {"op": "call_tool", "name": "book_room",
             "arguments": {"day": "2026-09-17", "hour": 9, "room_hint": "the big room"}},
            {"op": "call_tool", "name": "create_ticket", "arguments": {"title": "Printer on fire"}},
        ],
        "elicitation": [
            {"action": "accept", "content": {"room_id": "studio-b"}},
            {"action": "accept", "content": {"choice": "atrium"}},
            {"action": "accept", "content": {"priority": 9}},
            {"action": "accept", "content": {"priority": 3}},
        ],
    })
}

/// Checks `policy_script`: the Atrium answer fails the policy's `authz`
/// (an error on the retry, never re-asked, the server never books it), and
/// the out-of-range priority comes back as a second round under the same
/// key with a red mark; the server receives only the valid answer.
pub async fn policy_outcomes(out: &Output, fronted: &Fronted) {
    let asked = out.asked_in(0);
    assert_eq!(asked.len(), 2, "{asked:#?}");
    let denied = out.step(0);
    assert_eq!(denied["ok"], false, "{denied}");
    assert_eq!(denied["error"]["code"], -32602, "{denied}");
    assert_eq!(
        denied["error"]["message"],
        "only the facilities group may book the Atrium"
    );
    assert_eq!(denied["error"]["data"]["reason"], "policy_denied");
    assert_eq!(denied["error"]["data"]["field"], "choice");
    fronted.counted("book_room", "policy_denied", 1.0).await;

    let asked = out.asked_in(1);
    assert_eq!(asked.len(), 2, "asked, then re-asked: {asked:#?}");
    let plain = "What priority (1-5) should the ticket 'Printer on fire' have?";
    assert_eq!(asked[0]["message"], plain);
    assert_eq!(
        asked[1]["message"],
        format!("{plain}\n\n✗ priority must be at most 5; 9 was given.")
    );
    assert_eq!(asked[1]["requestedSchema"], asked[0]["requestedSchema"]);
    if let (Some(first), Some(again)) = (out.key_of(asked[0]), out.key_of(asked[1])) {
        assert_eq!((first, again), ("priority", "priority"));
    }
    assert_eq!(
        out.result(1)["structuredContent"]["priority"],
        3,
        "{}",
        out.step(1)
    );
    fronted.counted("create_ticket", "completed", 1.0).await;
}

pub fn ticket_script() -> Value {
    three_calls(
        "create_ticket",
        json!({"title": "Printer on fire"}),
        json!({"priority": 4}),
    )
}

/// Checks `ticket_script`: one priority question per call; the server created
/// a ticket with priority 4, then heard decline, then cancel.
pub async fn ticket_outcomes(out: &Output, fronted: &Fronted) {
    // The key is named by policies/rooms.toml.
    let message = "What priority (1-5) should the ticket 'Printer on fire' have?";
    for q in out.one_question_each(0..3, message, "priority") {
        let priority = &q["requestedSchema"]["properties"]["priority"];
        assert_eq!(priority["type"], "integer", "{q}");
        assert_eq!(
            (priority["minimum"].as_i64(), priority["maximum"].as_i64()),
            (Some(1), Some(5))
        );
    }
    let created = out.result(0);
    assert_eq!(created["structuredContent"]["priority"], 4, "{created}");
    assert_eq!(created["structuredContent"]["title"], "Printer on fire");
    let ticket = created["structuredContent"]["ticket_id"].as_str().unwrap();
    assert_eq!(
        out.text(0),
        format!("Created ticket {ticket} 'Printer on fire' with priority 4.")
    );
    assert_eq!(out.text(1), "No priority chosen; no ticket created.");
    assert!(
        out.result(1).get("structuredContent").is_none(),
        "{}",
        out.step(1)
    );
    assert_eq!(out.text(2), "Ticket creation cancelled.");
    fronted.counted_three_ways("create_ticket").await;
}

/// Without the elicitation capability the rooms server never asks: its own
/// fallback is a tool error naming the missing capability.
pub fn rooms_fallback(out: &Output, step: usize) {
    let result = out.result(step);
    assert_eq!(result["isError"], true, "{result}");
    let text = out.texts(step).join("\n");
    assert!(
        text.starts_with(
            "Cannot ask the user: the client did not declare the `elicitation` capability (form mode)."
        ),
        "{text}"
    );
    assert_contains(&text, &["nothing was booked"]);
    // These clients speak 2026-07-28 and never send `initialize`: the text
    // must not send them looking for a step they do not have.
    assert!(!text.contains("initialize"), "{text}");
    assert!(out.elicitations().is_empty(), "{:#?}", out.lines);
}

// ---------------------------------------------------------------------------
// The fixtures report exactly what they received as JSON text.

/// A server tool that asks one question per call, called three times and
/// answered accept, decline and cancel: what the client must be asked, and
/// what the server must report it received.
pub struct ThreeWays {
    pub tool: &'static str,
    pub arguments: Value,
    /// The content an accepting user gives.
    pub accept: Value,
    pub message: &'static str,
    /// The form's one required field.
    pub required: &'static str,
    /// The form mode the client must see, where the server marks it.
    pub mode: Option<&'static str>,
    /// What the server reports for accept, decline and cancel.
    pub received: [Value; 3],
}

impl ThreeWays {
    /// A client-driver script: the three calls and their answers.
    pub fn script(&self) -> Value {
        three_calls(self.tool, self.arguments.clone(), self.accept.clone())
    }

    /// Runs `script` with `client` through `fronted`, checks its outcomes and
    /// returns the output.
    pub async fn run(&self, fronted: &Fronted, client: Client) -> Output {
        let out = fronted.run(client, &self.script()).await;
        self.outcomes(&out, fronted).await;
        out
    }

    /// Checks `script`'s output from either client driver: one question per
    /// call, what the server received, and the three endings counted.
    pub async fn outcomes(&self, out: &Output, fronted: &Fronted) {
        for q in out.one_question_each(0..3, self.message, "elicitation-1") {
            assert_eq!(q["requestedSchema"]["required"], json!([self.required]));
            if let Some(mode) = self.mode {
                // The server marks its form; redmark relays the mode as sent.
                assert_eq!(q["params"]["mode"], mode, "{q}");
            }
        }
        for (step, want) in self.received.iter().enumerate() {
            assert_eq!(&out.received(step), want, "step {step}");
        }
        fronted.counted_three_ways(self.tool).await;
    }
}

/// tests/fixtures/e2e_legacy_py.py's `register` (FastMCP's `ctx.elicit`).
pub fn fastmcp_register() -> ThreeWays {
    let accept = json!({"name": "Ada", "guests": 2});
    ThreeWays {
        tool: "register",
        arguments: json!({"event": "the launch party"}),
        message: "Who is coming to the launch party?",
        required: "name",
        mode: None,
        received: [
            json!({"action": "accept", "data": accept}),
            json!({"action": "decline", "data": null}),
            json!({"action": "cancel", "data": null}),
        ],
        accept,
    }
}

/// tests/fixtures/e2e_legacy_ts.mjs's `survey` (the npm sdk's `elicitInput`,
/// which marks its form).
pub fn ts_sdk_survey() -> ThreeWays {
    let accept = json!({"rating": 4, "comment": "strong"});
    ThreeWays {
        tool: "survey",
        arguments: json!({"topic": "the new coffee machine"}),
        message: "What do you think of the new coffee machine?",
        required: "rating",
        mode: Some("form"),
        received: [
            json!({"action": "accept", "content": accept}),
            json!({"action": "decline", "content": null}),
            json!({"action": "cancel", "content": null}),
        ],
        accept,
    }
}
