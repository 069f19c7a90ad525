//! `rooms`: a LEGACY, push-style MCP example server (protocol 2025-06-18 / 2025-11-25).
//!
//! It speaks MCP over stdio (newline-delimited JSON-RPC; stdout is the protocol,
//! logs go to stderr) and gives the redmark gateway a real pre-2026 server to
//! front. When a tool needs the user mid-call it does what legacy servers do:
//! while the `tools/call` is still pending it PUSHES `elicitation/create` to the
//! client and awaits `accept` / `decline` / `cancel`. It never returns a
//! 2026-07-28 `InputRequiredResult` (MRTR), and it never pushes to a client that
//! did not declare `elicitation`: those calls end in a tool error
//! (`isError: true`) saying what is missing.
//!
//! Why it always pushes: rmcp 3.11 does not choose push or MRTR for you.
//! `Peer::create_elicitation` refuses to send on 2026-07-28, and below that an
//! `InputRequiredResult` is turned into an error. Capping
//! `supported_protocol_versions` at 2025-11-25 makes `initialize` negotiate a
//! legacy version and rejects requests whose `_meta` names 2026-07-28, so
//! pushing is always allowed. [`Legacy`] hides rmcp's built-in `server/discover`.
//!
//! Seed lesson: "book the big room for Thursday". 2026-09-17 is a Thursday;
//! Studio B is taken at 09:00 and The Nook at 14:00 that day.

// An example/benchmark may panic on what it cannot do: it is not on a request path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../shared/legacy.rs"]
mod legacy;
use legacy::Legacy;

use std::{
    borrow::Cow,
    collections::BTreeMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    handler::server::wrapper::Parameters,
    model::*,
    service::{ElicitationMode, RequestContext},
    tool, tool_handler, tool_router,
    transport::stdio,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

mod catalogue;
mod store;

use catalogue::{Booking, ROOM_IDS, ROOMS, resolve_hint, room_by_id};
use store::Store;

const VERSION: &str = match option_env!("CARGO_PKG_VERSION") {
    Some(version) => version,
    None => "0.1.0",
};

type Ctx = RequestContext<RoleServer>;

fn text(text: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A tool error for an accepted answer that is not one of the allowed values.
fn bad_answer(answer: &Value, allowed: &str) -> CallToolResult {
    tool_error(format!(
        "The answer {answer} is not {allowed}; nothing was done."
    ))
}

fn structured(summary: String, value: Value) -> CallToolResult {
    let mut result = text(summary);
    result.structured_content = Some(value);
    result
}

/// A plain `{type: string, enum: [...]}`. It is valid in 2025-06-18, 2025-11-25 and 2026-07-28.
fn string_enum(
    values: Vec<String>,
    description: impl Into<Cow<'static, str>>,
) -> PrimitiveSchemaDefinition {
    PrimitiveSchemaDefinition::Enum(EnumSchema::builder(values).description(description).build())
}

fn room_field() -> PrimitiveSchemaDefinition {
    let ids = ROOMS.iter().map(|room| room.id.to_owned()).collect();
    string_enum(
        ids,
        "The room to book. The Atrium seats 24, Studio B 12, The Nook 4.",
    )
}

/// How a question ends the call when the answer is not `accept`.
struct Question {
    declined: &'static str,
    cancelled: &'static str,
    /// Explains, after "Cannot ask the user: <why>.", what was needed and how to go on.
    fallback: String,
}

impl Question {
    /// Asks the user for one required `field`, the legacy way: it pushes
    /// `elicitation/create` to the client while the current `tools/call` is
    /// still pending. It returns the field's value (`null` if it is missing).
    async fn ask(
        self,
        ctx: &Ctx,
        message: String,
        field: &str,
        schema: PrimitiveSchemaDefinition,
    ) -> Result<Value, CallToolResult> {
        let cannot =
            |why: &str| tool_error(format!("Cannot ask the user: {why}. {}", self.fallback));
        // The client's capabilities as this process saw them in `initialize`
        // (peer info). Behind redmark that is the capability profile of the
        // client, whichever era it speaks: a 2025-era client declared it in its
        // own `initialize`, a 2026-07-28 client in each request's `_meta` and
        // never sends `initialize`. So the text names the capability, not the
        // step that carried it.
        let modes = ctx.peer.supported_elicitation_modes();
        if !modes.contains(&ElicitationMode::Form) {
            let why = "the client did not declare the `elicitation` capability (form mode)";
            return Err(cannot(why));
        }
        let properties = BTreeMap::from([(field.to_owned(), schema)]);
        let requested_schema =
            ElicitationSchema::new(properties).with_required(vec![field.to_owned()]);
        eprintln!("rooms: pushing elicitation/create for `{field}`: {message}");
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        };
        let result = tokio::select! {
            result = ctx.peer.create_elicitation(params) => result,
            () = ctx.ct.cancelled() => return Err(cannot("the tool call was cancelled")),
        };
        let result = result.map_err(|e| cannot(&format!("elicitation/create failed ({e})")))?;
        eprintln!("rooms: elicitation answered: {:?}", result.action);
        match result.action {
            ElicitationAction::Accept => {
                let mut content = result.content.unwrap_or_default();
                Ok(content.get_mut(field).map(Value::take).unwrap_or_default())
            }
            ElicitationAction::Decline => Err(text(self.declined)),
            // `cancel`, or an action newer than this SDK: the user dismissed the question.
            _ => Err(text(self.cancelled)),
        }
    }
}

const NO_ROOM: &str = "No room chosen; nothing booked.";
const BOOKING_CANCELLED: &str = "Booking cancelled.";

#[derive(Deserialize, JsonSchema)]
struct BookRoom {
    /// Day of the booking, e.g. "2026-09-17".
    day: String,
    /// Start hour on a 24-hour clock (0-23). Bookings last one hour.
    hour: u32,
    /// Room id or name ("atrium", "The Nook"), or a description such as "the big room".
    room_hint: String,
}

#[derive(Deserialize, JsonSchema)]
struct CancelBooking {
    /// The booking id returned by book_room, e.g. "bk-3".
    booking_id: String,
}

#[derive(Deserialize, JsonSchema)]
struct NewTicket {
    /// Short title of the ticket.
    title: String,
}

#[derive(Deserialize, JsonSchema)]
struct NewInvoice {
    /// Customer name.
    customer: String,
    /// Amount to invoice, in the currency the user picks.
    amount: f64,
}

#[derive(Deserialize, JsonSchema)]
struct NewMeeting {
    /// Room id (atrium, studio-b, nook). If it is left out, the server asks the user.
    #[serde(default)]
    room_id: Option<String>,
    /// Start of the meeting, e.g. "2026-09-17T09:00".
    start: String,
}

#[derive(Clone)]
struct Rooms {
    store: Arc<Store>,
    /// Set by `logging/setLevel` to debug or info.
    info_logs: Arc<AtomicBool>,
}

#[tool_router]
impl Rooms {
    fn new() -> Self {
        Self {
            store: Arc::new(Store::from_env()),
            info_logs: Arc::default(),
        }
    }

    /// Sends one `notifications/message` if the client asked for info-level logs.
    #[allow(deprecated)] // logging is SEP-2577-deprecated in rmcp, but part of 2025-11-25
    async fn log_info(&self, ctx: &Ctx, message: String) {
        if self.info_logs.load(Ordering::Relaxed) {
            let param = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(message))
                .with_logger("rooms");
            if let Err(e) = ctx.peer.notify_logging_message(param).await {
                eprintln!("rooms: could not send a log message: {e}");
            }
        }
    }

    /// List the bookable rooms and their seats.
    #[tool(annotations(read_only_hint = true))]
    async fn list_rooms(&self) -> CallToolResult {
        let (mut lines, mut rooms) = (Vec::new(), Vec::new());
        for room in &ROOMS {
            lines.push(format!("{} ({}): {} seats", room.name, room.id, room.seats));
            rooms.push(json!({"id": room.id, "name": room.name, "seats": room.seats}));
        }
        structured(lines.join("\n"), json!({ "rooms": rooms }))
    }

    /// Book a room for one hour. If room_hint is not exactly one room id or name,
    /// the server asks the user which room; if the room is taken, it offers a free one.
    #[tool]
    async fn book_room(&self, Parameters(args): Parameters<BookRoom>, ctx: Ctx) -> CallToolResult {
        let (day, hour, hint) = (args.day.trim(), args.hour, args.room_hint);
        if day.is_empty() || hour > 23 {
            let invalid = format!("Invalid slot (day {day:?}, hour {hour}); nothing booked.");
            return tool_error(invalid);
        }
        let mut room = match resolve_hint(&hint) {
            Ok(room) => room,
            Err(matches) => {
                let problem = match matches.len() {
                    0 | 1 => "does not name exactly one room",
                    _ => "matches more than one room",
                };
                let message = format!("'{hint}' {problem}. Which did you mean?");
                let question = Question {
                    declined: NO_ROOM,
                    cancelled: BOOKING_CANCELLED,
                    fallback: format!(
                        "room_hint '{hint}' does not name exactly one room, so nothing was booked. \
                         Call book_room again with room_hint set to atrium, studio-b or nook."
                    ),
                };
                let answer = match question.ask(&ctx, message, "room_id", room_field()).await {
                    Ok(answer) => answer,
                    Err(done) => return done,
                };
                let Some(room) = answer.as_str().and_then(room_by_id) else {
                    return bad_answer(&answer, ROOM_IDS);
                };
                room
            }
        };

        let conflict = self.store.with(|s| s.taken(room, day, hour));
        if let Some(existing) = conflict {
            let free = self.store.with(|s| s.free_rooms(day, hour));
            let name = room.name;
            let clash = format!("{name} is already booked on {day} at {hour:02}:00 ({existing})");
            if free.is_empty() {
                return tool_error(format!("{clash}; no other room is free."));
            }
            let mut choices: Vec<String> = free.iter().map(|r| r.id.to_owned()).collect();
            choices.push("cancel".into());
            let seats: Vec<_> = free
                .iter()
                .map(|r| format!("{} {}", r.name, r.seats))
                .collect();
            let description = format!("A free room (seats: {}) or \"cancel\".", seats.join(", "));
            let field = string_enum(choices, description);
            let fallback = format!("{clash}, so nothing was booked. Try another room or hour.");
            let question = Question {
                declined: NO_ROOM,
                cancelled: BOOKING_CANCELLED,
                fallback,
            };
            let message = format!("{clash}. Book another room instead?");
            let choice = match question.ask(&ctx, message, "choice", field).await {
                Ok(answer) => answer,
                Err(done) => return done,
            };
            if choice == "cancel" {
                return text(BOOKING_CANCELLED);
            }
            let Some(offered) = free.into_iter().find(|r| choice == r.id) else {
                return bad_answer(&choice, "one of the offered choices");
            };
            room = offered;
        }

        let booked = self.store.with(|state| match state.taken(room, day, hour) {
            Some(existing) => Err(existing),
            None => Ok(state.book(room, day, hour)),
        });
        let booking_id = match booked {
            Ok(id) => id,
            Err(existing) => {
                let taken = format!("{} was booked meanwhile ({existing}).", room.name);
                return tool_error(taken);
            }
        };
        let (id, slot) = (room.id, format!("{day} at {hour:02}:00"));
        eprintln!("rooms: booked {booking_id}: {id} on {slot}");
        self.log_info(&ctx, format!("booked {booking_id}: {id} on {slot}"))
            .await;
        let summary = format!(
            "Booked {} ({id}, {} seats) on {slot}. Booking id: {booking_id}.",
            room.name, room.seats
        );
        let value = json!({"booking_id": booking_id, "room_id": id, "day": day, "hour": hour});
        structured(summary, value)
    }

    /// Cancel a room booking by its id. This frees the room and cannot be undone.
    #[tool(annotations(destructive_hint = true, read_only_hint = false))]
    async fn cancel_booking(&self, Parameters(args): Parameters<CancelBooking>) -> CallToolResult {
        let id = args.booking_id.trim();
        let removed = self.store.with(|state| {
            state.bookings.remove(id).ok_or_else(|| {
                let known: Vec<&str> = state.bookings.keys().map(String::as_str).collect();
                known.join(", ")
            })
        });
        let Booking { room, day, hour } = match removed {
            Ok(booking) => booking,
            Err(known) => {
                let unknown = format!("No booking with id '{id}'. Known ids: {known}.");
                return tool_error(unknown);
            }
        };
        let name = room.name;
        text(format!(
            "Cancelled booking {id}: {name} on {day} at {hour:02}:00."
        ))
    }

    /// Create a support ticket. The server asks the user for its priority (1-5).
    #[tool]
    async fn create_ticket(
        &self,
        Parameters(args): Parameters<NewTicket>,
        ctx: Ctx,
    ) -> CallToolResult {
        let title = args.title;
        let field = IntegerSchema::new()
            .range(1, 5)
            .description("1 lowest, 5 most urgent");
        let field = PrimitiveSchemaDefinition::Integer(field);
        let question = Question {
            declined: "No priority chosen; no ticket created.",
            cancelled: "Ticket creation cancelled.",
            fallback: "create_ticket needs a priority (1-5) from the user and has no priority \
                       argument, so no ticket was created."
                .into(),
        };
        let message = format!("What priority (1-5) should the ticket '{title}' have?");
        let answer = match question.ask(&ctx, message, "priority", field).await {
            Ok(answer) => answer,
            Err(done) => return done,
        };
        let Some(priority) = answer.as_i64().filter(|p| (1..=5).contains(p)) else {
            return bad_answer(&answer, "an integer from 1 to 5");
        };
        let ticket_id = self.store.with(|s| s.next_id("tck"));
        let summary = format!("Created ticket {ticket_id} '{title}' with priority {priority}.");
        let value = json!({"ticket_id": ticket_id, "title": title, "priority": priority});
        structured(summary, value)
    }

    /// Create an invoice for a customer. The server asks the user for the currency.
    #[tool]
    async fn create_invoice(
        &self,
        Parameters(args): Parameters<NewInvoice>,
        ctx: Ctx,
    ) -> CallToolResult {
        let (customer, amount) = (args.customer, args.amount);
        if !amount.is_finite() || amount <= 0.0 {
            let invalid = format!("amount must be a positive number, not {amount}.");
            return tool_error(invalid);
        }
        // Progress 1/2 before asking and 2/2 when done, if the client sent a progressToken.
        let progress = async |step: f64, message: &str| {
            let Some(token) = ctx.meta.get_progress_token() else {
                return;
            };
            let param = ProgressNotificationParam::new(token, step).with_total(2.0);
            if let Err(e) = ctx.peer.notify_progress(param.with_message(message)).await {
                eprintln!("rooms: could not send progress: {e}");
            }
        };
        progress(1.0, "Invoice drafted; asking for the currency").await;
        let currencies = ["EUR", "GBP", "USD"];
        let field = string_enum(currencies.map(String::from).into(), "Invoice currency.");
        let question = Question {
            declined: "No currency chosen; no invoice created.",
            cancelled: "Invoice cancelled.",
            fallback: "create_invoice needs a currency (EUR, GBP or USD) from the user and has no \
                       currency argument, so no invoice was created."
                .into(),
        };
        let message = format!("Which currency is the invoice for {customer} ({amount:.2}) in?");
        let answer = match question.ask(&ctx, message, "currency", field).await {
            Ok(answer) => answer,
            Err(done) => return done,
        };
        let Some(currency) = answer.as_str().filter(|c| currencies.contains(c)) else {
            return bad_answer(&answer, "EUR, GBP or USD");
        };
        progress(2.0, "Invoice issued").await;
        let invoice_id = self.store.with(|s| s.next_id("inv"));
        let summary = format!("Invoice {invoice_id} for {customer}: {amount:.2} {currency}.");
        let value = json!({
            "invoice_id": invoice_id, "customer": customer, "amount": amount, "currency": currency
        });
        structured(summary, value)
    }

    /// Schedule a meeting at `start`. If room_id is left out, the server asks which room.
    #[tool]
    async fn book_meeting(
        &self,
        Parameters(args): Parameters<NewMeeting>,
        ctx: Ctx,
    ) -> CallToolResult {
        let start = args.start;
        // The model could have supplied room_id itself. The server simply asks;
        // a gateway policy may later reject this "model-owned value" question.
        let answer = match args.room_id {
            Some(id) => Value::String(id.trim().to_owned()),
            None => {
                let question = Question {
                    declined: "No room chosen; no meeting booked.",
                    cancelled: "Meeting booking cancelled.",
                    fallback: format!(
                        "Call book_meeting again with room_id set to one of {ROOM_IDS}."
                    ),
                };
                let message = format!("Which room should the meeting at {start} be in?");
                match question.ask(&ctx, message, "room_id", room_field()).await {
                    Ok(answer) => answer,
                    Err(done) => return done,
                }
            }
        };
        let Some(room) = answer.as_str().and_then(room_by_id) else {
            return bad_answer(&answer, ROOM_IDS);
        };
        let (id, name) = (room.id, room.name);
        let meeting_id = self.store.with(|s| s.next_id("mtg"));
        let summary = format!("Meeting {meeting_id} scheduled in {name} ({id}) at {start}.");
        let value = json!({"meeting_id": meeting_id, "room_id": id, "start": start});
        structured(summary, value)
    }
}

#[tool_handler]
impl ServerHandler for Rooms {
    #[allow(deprecated)] // logging is SEP-2577-deprecated in rmcp, but part of 2025-11-25
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder().enable_tools();
        ServerConfig::new(capabilities.enable_logging().build())
            .with_server_info(Implementation::new("rooms-example", VERSION))
            .with_protocol_version(ProtocolVersion::V_2025_11_25)
            .with_instructions("Room booking demo. Some tools ask the user while they run.")
    }

    /// Legacy only: this caps `initialize` negotiation and rejects inline 2026-07-28 requests.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    #[allow(deprecated)] // logging, as above
    async fn set_level(&self, request: SetLevelRequestParams, _: Ctx) -> Result<(), ErrorData> {
        let info = matches!(request.level, LoggingLevel::Debug | LoggingLevel::Info);
        self.info_logs.store(info, Ordering::Relaxed);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    eprintln!("rooms-example {VERSION}: legacy MCP server on stdio (pushes elicitation/create)");
    let running = Legacy(Rooms::new()).serve(stdio()).await?;
    let reason = running.waiting().await?;
    eprintln!("rooms-example: stopped ({reason:?})");
    Ok(())
}
