use super::*;

fn q(method: &str, params: Value) -> Question {
    let mut q = question(Id::Number(1), method, Some(params)).unwrap();
    q.key = "k".into();
    q
}

#[test]
fn form_elicitation_keeps_its_schema_and_drops_legacy_members() {
    let q = q(
        "elicitation/create",
        json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}, "_meta": {"progressToken": 0}, "task": {}}),
    );
    assert_eq!(
        q.request(),
        json!({"method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object", "properties": {}}}})
    );
    assert!(!q.url_mode);
    assert_eq!(q.needs.to_value(), json!({"elicitation": {"form": {}}}));
}

#[test]
fn url_elicitation_loses_its_elicitation_id() {
    let q = q(
        "elicitation/create",
        json!({"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e1"}),
    );
    assert!(q.url_mode);
    assert_eq!(
        q.request()["params"],
        json!({"mode": "url", "message": "m", "url": "https://x"})
    );
    assert_eq!(q.needs.to_value(), json!({"elicitation": {"url": {}}}));
}

#[test]
fn roots_and_sampling() {
    let r = question(Id::Number(2), "roots/list", None).unwrap();
    assert_eq!(r.request(), json!({"method": "roots/list"}));
    let s = q(
        "sampling/createMessage",
        json!({"messages": [], "maxTokens": 5, "tools": []}),
    );
    assert_eq!(s.needs.to_value(), json!({"sampling": {"tools": {}}}));
    assert!(question(Id::Number(3), "tasks/get", None).is_err());
}

#[test]
fn coverage_follows_the_profile() {
    let form = q(
        "elicitation/create",
        json!({"message": "m", "requestedSchema": {}}),
    );
    let url = q(
        "elicitation/create",
        json!({"mode": "url", "message": "m", "url": "https://x"}),
    );
    let p = Profile::from_client_capabilities(&json!({"elicitation": {}}));
    assert!(covered(&p, &form) && !covered(&p, &url));
    let p = Profile::from_client_capabilities(&json!({"elicitation": {"url": {}}}));
    assert!(!covered(&p, &form) && covered(&p, &url));
    let tools = q(
        "sampling/createMessage",
        json!({"messages": [], "maxTokens": 5, "tools": []}),
    );
    assert!(!covered(
        &Profile::from_client_capabilities(&json!({"sampling": {}})),
        &tools
    ));
    assert!(covered(
        &Profile::from_client_capabilities(&json!({"sampling": {"tools": {}}})),
        &tools
    ));
}

#[test]
fn keys_use_configured_names_then_numbers() {
    let mut n = KeyNamer::new(KeyNames::InOrder(vec!["room".into(), "greeting".into()]));
    assert_eq!(n.next(Kind::Elicitation), "room");
    // In order: the second question takes the second name, whatever its kind.
    assert_eq!(n.next(Kind::Roots), "greeting");
    assert_eq!(n.next(Kind::Elicitation), "elicitation-2");
    assert_eq!(n.next(Kind::Sampling), "sampling-1");
    assert_eq!(n.next(Kind::Roots), "roots-2");
}

#[test]
fn keys_by_kind_name_concurrent_pushes_the_same_in_any_arrival_order() {
    let names = KeyNames::ByKind {
        elicitation: vec!["user_name".into(), "email".into()],
        sampling: vec!["greeting".into()],
        roots: vec!["client_roots".into()],
    };
    for order in [
        [Kind::Elicitation, Kind::Sampling, Kind::Roots],
        [Kind::Roots, Kind::Elicitation, Kind::Sampling],
        [Kind::Sampling, Kind::Roots, Kind::Elicitation],
    ] {
        let mut n = KeyNamer::new(names.clone());
        let named: Vec<(Kind, String)> = order.iter().map(|k| (*k, n.next(*k))).collect();
        for (kind, key) in named {
            let want = match kind {
                Kind::Elicitation => "user_name",
                Kind::Sampling => "greeting",
                Kind::Roots => "client_roots",
            };
            assert_eq!(key, want, "{order:?}");
        }
        // Past a kind's names, the numbering is per kind.
        assert_eq!(n.next(Kind::Elicitation), "email");
        assert_eq!(n.next(Kind::Sampling), "sampling-2");
        assert_eq!(n.next(Kind::Elicitation), "elicitation-3");
    }
}

#[test]
fn the_three_outcomes_stay_distinct() {
    let form = q(
        "elicitation/create",
        json!({"message": "m", "requestedSchema": {}}),
    );
    assert_eq!(
        answer(&form, &json!({"action": "accept", "content": {"p": 3}})).unwrap(),
        json!({"action": "accept", "content": {"p": 3}})
    );
    assert_eq!(
        answer(&form, &json!({"action": "decline"})).unwrap(),
        json!({"action": "decline"})
    );
    assert_eq!(
        answer(&form, &json!({"action": "cancel"})).unwrap(),
        json!({"action": "cancel"})
    );
}

#[test]
fn malformed_answers_name_the_key() {
    let form = q(
        "elicitation/create",
        json!({"message": "m", "requestedSchema": {}}),
    );
    for bad in [
        json!("yes"),
        json!({"action": "maybe"}),
        json!({"action": "decline", "content": {"p": 1}}),
        json!({"action": "accept"}),
        json!({"action": "accept", "content": {"p": {"nested": 1}}}),
    ] {
        let e = answer(&form, &bad).unwrap_err();
        assert_eq!(e.key, "k", "{bad}");
    }
    let url = q(
        "elicitation/create",
        json!({"mode": "url", "message": "m", "url": "https://x"}),
    );
    assert_eq!(
        answer(&url, &json!({"action": "accept"})).unwrap(),
        json!({"action": "accept"})
    );
    assert!(answer(&url, &json!({"action": "accept", "content": {"a": 1}})).is_err());
    let roots = question(Id::Number(2), "roots/list", None).unwrap();
    assert!(answer(&roots, &json!({"roots": [{"name": "x"}]})).is_err());
    assert!(answer(&roots, &json!({"roots": [{"uri": "file:///x"}]})).is_ok());
}

#[test]
fn a_held_question_gives_back_its_schema_fields_and_red_mark() {
    let schema = json!({"type": "object", "properties": {"zone": {"type": "string"}, "age": {"type": "integer"}}, "required": ["zone"]});
    let (mut q, params) = question_and_params(
        Id::Number(1),
        "elicitation/create",
        Some(
            json!({"message": "Where?", "requestedSchema": schema, "_meta": {"progressToken": 1}}),
        ),
    )
    .unwrap();
    // The params the policy checks are the ones the client is asked with.
    assert_eq!(
        params,
        json!({"message": "Where?", "requestedSchema": schema})
    );
    assert_eq!(q.schema(), Some(schema.clone()));
    // In the server's order, not sorted.
    assert_eq!(q.field_names(), ["zone", "age"]);
    q.mark("zone must be one of eu, us");
    assert_eq!(q.reasks, 1);
    assert_eq!(
        q.request()["params"]["message"],
        "Where?\n\n✗ zone must be one of eu, us."
    );
    assert_eq!(
        q.schema(),
        Some(schema),
        "a red mark leaves the schema as it was"
    );

    // URL mode and sampling have no form: no schema, no fields.
    let url = q_url();
    assert_eq!(url.schema(), None);
    assert!(url.field_names().is_empty());
    let recorded = Question::recorded("elicitation-1", Kind::Elicitation, false);
    assert_eq!(recorded.request(), Value::Null);
    assert_eq!(recorded.schema(), None);
    assert_eq!(recorded.needs, Needs::Unknown);
}

fn q_url() -> Question {
    q(
        "elicitation/create",
        json!({"mode": "url", "message": "m", "url": "https://x"}),
    )
}

#[test]
fn offered_defaults_are_read_back_from_the_question_as_asked() {
    let schema = json!({"type": "object", "properties": {
        "currency": {"type": "string", "enum": ["EUR", "GBP"]},
        "nights": {"type": "integer", "default": 1},
        "note": {"type": "string"},
    }});
    let mut asked = q(
        "elicitation/create",
        json!({"message": "m", "requestedSchema": schema}),
    );
    // Only where the field has no default and the value fits.
    asked.offer_defaults(vec![
        ("currency".into(), json!("EUR")),
        ("nights".into(), json!(3)),
        ("note".into(), json!(7)),
    ]);
    assert_eq!(asked.offered, [("currency".to_owned(), json!("EUR"))]);
    // Rebuilt from the request as asked (a native retry): the names say
    // which defaults were ours, the request holds their values.
    let params = asked.request()["params"].clone();
    let mut again = q("elicitation/create", params);
    assert!(again.offered.is_empty());
    again.recall_offered(&["currency".into(), "missing".into()]);
    assert_eq!(again.offered, [("currency".to_owned(), json!("EUR"))]);
    // The server's own default is never counted as offered by redmark.
    again.recall_offered(&[]);
    assert!(again.offered.is_empty());
}

#[test]
fn a_native_input_request_is_the_question_under_its_key() {
    let request = json!({"method": "elicitation/create",
        "params": {"message": "Sure?", "requestedSchema": {"type": "object", "properties": {}}}});
    let q = input_request("confirm", &request).unwrap();
    assert_eq!(q.key, "confirm");
    assert_eq!(q.request(), request);
    assert!(
        input_request("k", &json!({"params": {}})).is_none(),
        "no method"
    );
    assert!(input_request("k", &json!({"method": "tools/call", "params": {}})).is_none());
    assert!(input_request("k", &json!({"method": "elicitation/create", "params": 3})).is_none());
}

#[test]
fn shaping_narrows_the_question_as_asked_and_defaults_follow_it() {
    let policy = crate::policy::Policy::parse(
        "[tool.t.fields.amount]\nminimum = 0\nmaximum = 100\n[tool.t.fields.room]\nenum = [\"atrium\", \"nook\"]\n",
        "p.toml",
    )
    .unwrap();
    let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
        "amount": {"type": "integer"},
        "room": {"type": "string"},
        "note": {"type": "string"},
    }}});
    let mut asked = q("elicitation/create", params.clone());
    asked.fingerprint = crate::mrtr::state::fingerprint("elicitation/create", &params);
    let before = asked.fingerprint.clone();
    asked.shape(policy.shaping("t"));
    assert_eq!(asked.narrowed, ["amount", "room"]);
    let schema = asked.schema().unwrap();
    assert_eq!(
        schema["properties"]["amount"],
        json!({"type": "integer", "minimum": 0, "maximum": 100})
    );
    assert_eq!(
        schema["properties"]["room"]["enum"],
        json!(["atrium", "nook"])
    );
    assert_eq!(schema["properties"]["note"], json!({"type": "string"}));
    // Replay compares the server's question, which shaping leaves alone.
    assert_eq!(asked.fingerprint, before);
    // A default the narrowed field refuses is not offered.
    asked.offer_defaults(vec![
        ("room".into(), json!("studio")),
        ("amount".into(), json!(5)),
    ]);
    assert_eq!(asked.offered, [("amount".to_owned(), json!(5))]);
    // Off for the tool: the form stays the server's.
    let mut plain = q("elicitation/create", params.clone());
    plain.shape(None);
    assert!(plain.narrowed.is_empty());
    assert_eq!(plain.request()["params"], params);
    // A native question rebuilt for tasks: only its schema changes.
    let native = json!({"method": "elicitation/create", "params": params});
    let shown = crate::policy::shape::request(&native, policy.shaping("t"));
    assert_eq!(shown["params"]["message"], "m");
    assert_eq!(
        shown["params"]["requestedSchema"]["properties"]["amount"]["maximum"],
        100
    );
    assert_eq!(crate::policy::shape::request(&native, None), native);
}
