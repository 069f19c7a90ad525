use super::*;
use proptest::prelude::*;
use serde_json::json;

fn claims() -> Claims {
    Claims {
        v: 1,
        op: "00112233445566778899aabbccddeeff".into(),
        node: "n1".into(),
        pr: principal_digest("rooms", "alice"),
        exp: 4_000_000_000,
        rq: "ab".repeat(32),
        rd: 1,
        m: "hold".into(),
        tc: None,
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

#[test]
fn request_digest_ignores_key_order_but_not_values() {
    let a = json!({"name": "t", "arguments": {"a": 1, "b": {"x": 1, "y": 2}}});
    let b = json!({"arguments": {"b": {"y": 2, "x": 1}, "a": 1}, "name": "t", "_meta": {"other": true}});
    let c = json!({"name": "t", "arguments": {"a": 2, "b": {"x": 1, "y": 2}}});
    let d = |v: &Value| request_digest("r", "tools/call", v.as_object().unwrap());
    assert_eq!(d(&a), d(&b));
    assert_ne!(d(&a), d(&c));
    assert_ne!(
        d(&a),
        request_digest("other-route", "tools/call", a.as_object().unwrap())
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
