use super::*;
use proptest::prelude::*;
use serde_json::json;

fn claims() -> Claims {
    Claims {
        v: CLAIMS_VERSION,
        op: "00112233445566778899aabbccddeeff".into(),
        node: "n1".into(),
        pr: principal_digest("rooms", "alice"),
        exp: 4_000_000_000,
        rq: "ab".repeat(32),
        rd: 1,
        m: "hold".into(),
        tc: None,
        ans: Vec::new(),
        ask: Vec::new(),
        nat: None,
        addr: None,
    }
}

fn ring() -> Keyring {
    Keyring::new(Key::new("k1", vec![7; 32]), vec![])
}

#[test]
fn seals_and_opens() {
    let token = ring().seal(&claims());
    assert!(token.starts_with("k1."));
    assert_eq!(ring().open(&token, SystemTime::now()).unwrap(), claims());
}

#[test]
fn checks_in_order() {
    let r = ring();
    let token = r.seal(&claims());
    assert_eq!(
        r.open("garbage", SystemTime::now()),
        Err(StateError::Malformed)
    );
    assert_eq!(
        r.open(&format!("{token}.x"), SystemTime::now()),
        Err(StateError::Malformed)
    );
    let (kid, _) = token.split_once('.').unwrap();
    assert_eq!(
        r.open(&format!("{kid}.AAAA"), SystemTime::now()),
        Err(StateError::Malformed),
        "shorter than a nonce and a tag"
    );
    let other = Keyring::new(Key::new("k9", vec![1; 32]), vec![]).seal(&claims());
    assert_eq!(
        r.open(&other, SystemTime::now()),
        Err(StateError::UnknownKey)
    );
    let forged = Keyring::new(Key::new("k1", vec![1; 32]), vec![]).seal(&claims());
    assert_eq!(
        r.open(&forged, SystemTime::now()),
        Err(StateError::BadSignature)
    );
    let mut old = claims();
    old.exp = 10;
    assert_eq!(
        r.open(&r.seal(&old), SystemTime::now()),
        Err(StateError::Expired)
    );
}

#[test]
fn rotation_keeps_old_states_valid() {
    let old = Key::new("k1", vec![7; 32]);
    let token = Keyring::new(old.clone(), vec![]).seal(&claims());
    let rotated = Keyring::new(Key::new("k2", vec![9; 32]), vec![old]);
    assert_eq!(rotated.open(&token, SystemTime::now()).unwrap(), claims());
    assert!(rotated.seal(&claims()).starts_with("k2."));
}

/// Claims of a replay-mode round that carries an answer.
fn replay_claims(secret_value: &str) -> Claims {
    Claims {
        m: REPLAY.into(),
        rd: 2,
        ans: vec![Answered {
            f: fingerprint("elicitation/create", &json!({"message": "Name?"})),
            a: json!({"action": "accept", "content": {"name": secret_value}}),
        }],
        ask: vec![Asking {
            k: "elicitation-2".into(),
            f: "cd".repeat(32),
            kd: "elicitation".into(),
            rk: 1,
            at: 1_700_000_000_000,
        }],
        ..claims()
    }
}

#[test]
fn a_replay_state_round_trips_and_hides_its_answers() {
    let r = ring();
    let c = replay_claims("Zanzibar-4711");
    let token = r.seal(&c);
    assert_eq!(r.open(&token, SystemTime::now()).unwrap(), c);
    // Neither the token nor its base64 decoding shows the answer (or any
    // claim). Needles long enough that random ciphertext cannot hold them.
    let (_, blob) = token.split_once('.').unwrap();
    let bytes = B64.decode(blob).unwrap();
    for needle in [
        "Zanzibar-4711",
        "\"accept\"",
        "elicitation-2",
        "00112233445566778899",
    ] {
        assert!(!token.contains(needle), "{needle} in {token}");
        assert!(
            !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "{needle} in the decoded blob"
        );
    }
    // Two seals of the same claims differ (a fresh nonce each time).
    assert_ne!(r.seal(&c), token);
}

#[test]
fn a_tampered_replay_state_is_a_bad_signature() {
    let r = ring();
    let token = r.seal(&replay_claims("x"));
    let (kid, blob) = token.split_once('.').unwrap();
    let mut bytes = B64.decode(blob).unwrap();
    // The nonce, the ciphertext and the tag: a flipped bit anywhere fails the tag.
    for pos in [0, NONCE_LEN, bytes.len() / 2, bytes.len() - 1] {
        bytes[pos] ^= 1;
        let tampered = format!("{kid}.{}", B64.encode(&bytes));
        assert_eq!(
            r.open(&tampered, SystemTime::now()),
            Err(StateError::BadSignature),
            "position {pos}"
        );
        bytes[pos] ^= 1;
    }
    // The key id in clear is bound too: the same blob under another id of the
    // same secret does not open.
    let twin = Keyring::new(
        Key::new("k2", vec![7; 32]),
        vec![Key::new("k1", vec![7; 32])],
    );
    assert_eq!(
        twin.open(&format!("k2.{blob}"), SystemTime::now()),
        Err(StateError::BadSignature)
    );
}

#[test]
fn a_state_past_the_bound_is_refused_before_any_work_and_never_sealed() {
    let r = ring().with_max_len(1024);
    let small = replay_claims("x");
    assert!(r.seal_bounded(&small).unwrap().len() <= 1024);
    let big = replay_claims(&"y".repeat(1024));
    let err = r.seal_bounded(&big).unwrap_err();
    assert_eq!(err.max, 1024);
    assert!(err.len > 1024, "{err}");
    // A longer token is refused for its length, whatever it holds.
    let long = ring().seal(&big);
    assert_eq!(r.open(&long, SystemTime::now()), Err(StateError::TooLarge));
    assert_eq!(
        r.open(&"x".repeat(1025), SystemTime::now()),
        Err(StateError::TooLarge)
    );
    assert_eq!(StateError::TooLarge.reason(), Reason::StateTooLarge);
}

#[test]
fn rotation_opens_replay_states_of_every_key_and_seals_with_the_signing_one() {
    let old = Key::new("k1", vec![7; 32]);
    let c = replay_claims("rotated");
    let token = Keyring::new(old.clone(), vec![]).seal(&c);
    let rotated = Keyring::new(Key::new("k2", vec![9; 32]), vec![old]);
    assert_eq!(rotated.open(&token, SystemTime::now()).unwrap(), c);
    let resealed = rotated.seal(&c);
    assert!(resealed.starts_with("k2."));
    // The retired key alone cannot open what the new one sealed.
    assert_eq!(
        Keyring::new(Key::new("k1", vec![7; 32]), vec![]).open(&resealed, SystemTime::now()),
        Err(StateError::UnknownKey)
    );
}

#[test]
fn a_version_1_state_is_malformed() {
    let r = ring();
    let old = Claims { v: 1, ..claims() };
    assert_eq!(
        r.open(&r.seal(&old), SystemTime::now()),
        Err(StateError::Malformed)
    );
}

#[test]
fn fingerprints_follow_message_and_schema_not_key_order() {
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "number"}}});
    let reordered =
        json!({"properties": {"b": {"type": "number"}, "a": {"type": "string"}}, "type": "object"});
    let f = |m: &str, s: &Value| {
        fingerprint(
            "elicitation/create",
            &json!({"message": m, "requestedSchema": s}),
        )
    };
    assert_eq!(f("Name?", &schema), f("Name?", &reordered));
    assert_ne!(f("Name?", &schema), f("Name??", &schema));
    assert_ne!(f("Name?", &schema), f("Name?", &json!({"type": "object"})));
    assert_ne!(
        fingerprint("elicitation/create", &json!({})),
        fingerprint("roots/list", &json!({}))
    );
}

#[test]
fn request_digest_ignores_key_order_but_not_values() {
    let a = json!({"name": "t", "arguments": {"a": 1, "b": {"x": 1, "y": 2}}});
    let b = json!({"arguments": {"b": {"y": 2, "x": 1}, "a": 1}, "name": "t", "_meta": {"other": true}});
    let c = json!({"name": "t", "arguments": {"a": 2, "b": {"x": 1, "y": 2}}});
    let digest = |route: &str, v: &Value| {
        let p = crate::protocol::ClientParams::from(v.as_object().unwrap().clone());
        request_digest(route, "tools/call", &p.members, p.arguments.value())
    };
    let d = |v: &Value| digest("r", v);
    assert_eq!(d(&a), d(&b));
    assert_ne!(d(&a), d(&c));
    assert_ne!(d(&a), digest("other-route", &a));
    // Arguments kept as the client's text digest as their tree does.
    let text: crate::protocol::ClientParams =
        serde_json::from_str(r#"{"arguments": {"b": {"y": 2, "x": 1}, "a": 1}, "name": "t"}"#)
            .unwrap();
    assert_eq!(
        d(&a),
        request_digest("r", "tools/call", &text.members, text.arguments.value())
    );
}

#[test]
fn secrets_round_trip() {
    let s = generate_secret();
    assert_eq!(decode_secret(&s).unwrap().len(), 32);
    assert!(decode_secret("c2hvcnQ").is_none(), "too short");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Every single-byte change to a valid state is refused.
    #[test]
    fn any_single_byte_change_is_refused(pos in 0usize..1000, byte in any::<u8>()) {
        let r = ring();
        let token = r.seal(&claims());
        let mut bytes = token.clone().into_bytes();
        let pos = pos % bytes.len();
        prop_assume!(bytes[pos] != byte);
        bytes[pos] = byte;
        let changed = String::from_utf8_lossy(&bytes).into_owned();
        prop_assert!(r.open(&changed, SystemTime::now()).is_err(), "accepted a changed state: {changed}");
    }
}

#[test]
fn every_position_and_every_byte_value_changed_is_refused() {
    let r = ring();
    let token = r.seal(&claims());
    let bytes = token.as_bytes();
    for pos in 0..bytes.len() {
        for byte in 0u8..=255 {
            if byte == bytes[pos] {
                continue;
            }
            let mut changed = bytes.to_vec();
            changed[pos] = byte;
            let changed = String::from_utf8_lossy(&changed).into_owned();
            assert!(
                r.open(&changed, SystemTime::now()).is_err(),
                "position {pos} byte {byte} accepted"
            );
        }
    }
}

#[test]
fn canonical_json_sorts_keys_at_every_level_and_escapes_them() {
    let v = json!({"b": 1, "a\"q": {"d": [{"z": 1, "y": 2}], "c": null}, "é": "x"});
    assert_eq!(
        canonical_json(&v),
        r#"{"a\"q":{"c":null,"d":[{"y":2,"z":1}]},"b":1,"é":"x"}"#
    );
    // Equal arguments digest equally whatever order they were sent in.
    let reordered = json!({"é": "x", "a\"q": {"c": null, "d": [{"y": 2, "z": 1}]}, "b": 1});
    assert_eq!(canonical_json(&v), canonical_json(&reordered));
}

#[test]
fn a_wrapped_ask_names_the_offered_fields_only_when_there_are_some() {
    let ask = WrappedAsk {
        k: "k".into(),
        r: serde_json::json!({"method": "elicitation/create"}),
        msg: None,
        rk: 0,
        at: 1,
        of: Vec::new(),
        nw: Vec::new(),
    };
    let text = serde_json::to_string(&ask).unwrap();
    // A state sealed before defaults were offered reads the same.
    assert!(!text.contains("\"of\""), "{text}");
    assert!(!text.contains("\"nw\""), "{text}");
    assert_eq!(serde_json::from_str::<WrappedAsk>(&text).unwrap(), ask);
    let offered = WrappedAsk {
        of: vec!["nights".into()],
        ..ask
    };
    let text = serde_json::to_string(&offered).unwrap();
    assert_eq!(serde_json::from_str::<WrappedAsk>(&text).unwrap(), offered);
}

/// Mid-upgrade, replicas of two versions open each other's states: fields
/// this build does not know are ignored; a newer claims format is refused
/// as such, an older one as malformed.
#[test]
fn unknown_fields_are_ignored_and_a_newer_format_is_refused() {
    let r = ring();
    let with = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut v = serde_json::to_value(claims()).unwrap();
        edit(&mut v);
        r.seal_payload(&serde_json::to_vec(&v).unwrap())
    };
    let extended = with(&|v| {
        v["later"] = json!({"a": 1});
        v["ask"] = json!([{"k": "q", "f": "ff", "kd": "elicitation", "at": 1, "new": true}]);
    });
    let opened = r.open(&extended, SystemTime::now()).unwrap();
    assert_eq!(opened.ask.len(), 1);
    assert_eq!(
        Claims {
            ask: Vec::new(),
            ..opened
        },
        claims()
    );
    let newer = with(&|v| v["v"] = json!(CLAIMS_VERSION + 1));
    assert_eq!(
        r.open(&newer, SystemTime::now()),
        Err(StateError::NewerFormat(CLAIMS_VERSION + 1))
    );
    assert_eq!(
        StateError::NewerFormat(3).reason(),
        Reason::StateNewerFormat
    );
    let older = with(&|v| v["v"] = json!(CLAIMS_VERSION - 1));
    assert_eq!(
        r.open(&older, SystemTime::now()),
        Err(StateError::Malformed)
    );
}
