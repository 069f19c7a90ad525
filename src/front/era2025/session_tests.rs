//! The session table's unit tests: ids, principals, ends, bounds, idle, forwarding owners.

use super::*;
use crate::front::era2025::answers::PUSH_PREFIX;
use crate::mrtr::state::Keyring;
use serde_json::json;

fn sessions(config: SessionsConfig) -> Arc<Sessions> {
    Sessions::new(
        Arc::new(SharedKeyring::new(Keyring::ephemeral())),
        config,
        "n1".into(),
        None,
        Default::default(),
    )
}

fn opening<'a>(principal: &'a str) -> Opening<'a> {
    Opening {
        route: "r",
        principal,
        version: "2025-11-25",
        capabilities: json!({"elicitation": {}}),
        client_info: Some(json!({"name": "c", "version": "1"})),
        can_subscribe: false,
    }
}

#[test]
fn versions_negotiate_to_the_clients_or_the_latest() {
    assert_eq!(negotiate(Some("2025-06-18")), "2025-06-18");
    assert_eq!(negotiate(Some("2024-11-05")), "2024-11-05");
    assert_eq!(negotiate(Some("2026-07-28")), "2025-11-25");
    assert_eq!(negotiate(Some("1999-01-01")), "2025-11-25");
    assert_eq!(negotiate(None), "2025-11-25");
}

#[tokio::test]
async fn an_id_is_visible_ascii_and_opens_only_for_its_principal_and_route() {
    let s = sessions(SessionsConfig::default());
    let (id, session) = s.open(opening("alice")).unwrap();
    assert!(id.bytes().all(|b| (0x21..=0x7e).contains(&b)), "{id}");
    assert!(session.profile.elicitation_form);
    assert_eq!(s.find(&id, "r", "alice").unwrap().name, session.name);
    assert_eq!(s.find(&id, "r", "bob").unwrap_err(), SessionError::Unknown);
    assert_eq!(
        s.find(&id, "other", "alice").unwrap_err(),
        SessionError::Unknown
    );
    let mut forged = id.clone();
    forged.pop();
    forged.push(if id.ends_with('A') { 'B' } else { 'A' });
    assert_eq!(
        s.find(&forged, "r", "alice").unwrap_err(),
        SessionError::Unknown
    );
    assert_eq!(
        s.find("nonsense", "r", "alice").unwrap_err(),
        SessionError::Unknown
    );
}

/// Replicas of two versions adopt each other's sessions mid-upgrade: a
/// field this build does not know is ignored; a newer format is unknown.
#[tokio::test]
async fn a_session_id_from_a_newer_replica_is_adopted_when_it_can_be() {
    let keys = Arc::new(SharedKeyring::new(Keyring::ephemeral()));
    let table = |node: &str| {
        Sessions::new(
            keys.clone(),
            SessionsConfig::default(),
            node.into(),
            None,
            Default::default(),
        )
    };
    let (id, _) = table("a").open(opening("alice")).unwrap();
    let mut sealed: serde_json::Value =
        serde_json::from_slice(&keys.open_payload(&id).unwrap()).unwrap();
    sealed["added_later"] = json!({"x": 1});
    let extended = keys.seal_payload(&serde_json::to_vec(&sealed).unwrap());
    let adopted = table("b").find(&extended, "r", "alice").unwrap();
    assert_eq!(adopted.version, "2025-11-25");
    sealed["sid"] = json!(SEALED_FORMAT + 1);
    let newer = keys.seal_payload(&serde_json::to_vec(&sealed).unwrap());
    assert_eq!(
        table("c").find(&newer, "r", "alice").unwrap_err(),
        SessionError::Unknown
    );
}

#[tokio::test]
async fn an_ended_session_stays_ended_and_its_calls_end_with_it() {
    let s = sessions(SessionsConfig::default());
    let (id, session) = s.open(opening("alice")).unwrap();
    let call = session.call("7".into());
    s.end(&session);
    assert!(call.token.is_cancelled());
    assert_eq!(
        s.find(&id, "r", "alice").unwrap_err(),
        SessionError::Unknown
    );
    assert!(s.is_empty());
}

#[tokio::test]
async fn another_replica_adopts_a_session_it_never_saw() {
    let keys = Arc::new(SharedKeyring::new(Keyring::ephemeral()));
    let a = Sessions::new(
        keys.clone(),
        SessionsConfig::default(),
        "a".into(),
        Some("http://a".into()),
        Default::default(),
    );
    let b = Sessions::new(
        keys,
        SessionsConfig::default(),
        "b".into(),
        None,
        Default::default(),
    );
    let (id, opened) = a.open(opening("alice")).unwrap();
    let adopted = b.find(&id, "r", "alice").unwrap();
    assert_eq!(adopted.name, opened.name);
    // A question a pushed is answered on b: b names a as its owner.
    let asked = a.expect(&opened);
    let answer_id = crate::jsonrpc::Id::String(asked.id.clone());
    assert_eq!(a.owner_elsewhere(&answer_id), None, "a holds it");
    assert_eq!(
        b.owner_elsewhere(&answer_id),
        Some(("a".into(), "http://a".into()))
    );
    assert!(!b.deliver(&adopted, &answer_id, Ok(json!({}))));
    assert!(a.deliver(&opened, &answer_id, Ok(json!({"action": "cancel"}))));
    let forged = crate::jsonrpc::Id::String(format!("{PUSH_PREFIX}x.y"));
    assert_eq!(b.owner_elsewhere(&forged), None);
    assert_eq!(adopted.version, "2025-11-25");
    assert_eq!(
        adopted.client_info,
        Some(json!({"name": "c", "version": "1"}))
    );
}

#[tokio::test(start_paused = true)]
async fn at_a_bound_the_least_recently_used_idle_session_makes_room() {
    let s = sessions(SessionsConfig {
        max_per_principal: 2,
        max_total: 3,
        ..SessionsConfig::default()
    });
    let (first_id, _) = s.open(opening("alice")).unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let (second_id, _) = s.open(opening("alice")).unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    // The first is used again: the second is now the least recently used.
    s.find(&first_id, "r", "alice").unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    let (third_id, _) = s.open(opening("alice")).unwrap();
    assert_eq!(
        s.find(&second_id, "r", "alice").unwrap_err(),
        SessionError::Unknown,
        "the least recently used session ended (404: initialize again)"
    );
    s.find(&first_id, "r", "alice").unwrap();
    s.find(&third_id, "r", "alice").unwrap();
    assert_eq!(s.len(), 2);

    // max_total: bob's session takes the last place, carol's ends alice's
    // least recently used (the third, as the first was just found).
    tokio::time::advance(Duration::from_secs(1)).await;
    s.open(opening("bob")).unwrap();
    tokio::time::advance(Duration::from_secs(1)).await;
    s.find(&first_id, "r", "alice").unwrap();
    s.open(opening("carol")).unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(
        s.find(&third_id, "r", "alice").unwrap_err(),
        SessionError::Unknown
    );
    s.find(&first_id, "r", "alice").unwrap();
}

#[tokio::test]
async fn a_bound_refuses_only_when_every_session_in_the_way_has_a_call_in_flight() {
    let s = sessions(SessionsConfig {
        max_per_principal: 2,
        max_total: 3,
        ..SessionsConfig::default()
    });
    let (_, a1) = s.open(opening("alice")).unwrap();
    let (_, a2) = s.open(opening("alice")).unwrap();
    let _c1 = a1.call("1".into());
    let c2 = a2.call("2".into());
    assert_eq!(
        s.open(opening("alice")).unwrap_err(),
        SessionError::TooManyForPrincipal(2)
    );
    let (_, b) = s.open(opening("bob")).unwrap();
    let _cb = b.call("3".into());
    assert_eq!(s.open(opening("carol")).unwrap_err(), SessionError::Full(3));
    // One call ends: its session is idle, and makes room.
    drop(c2);
    s.open(opening("alice")).unwrap();
    assert_eq!(s.len(), 3);
}

#[tokio::test]
async fn an_adopted_session_counts_against_its_principal() {
    // Two replicas sharing keys: ids opened on A and adopted by B never
    // give B more than max_per_principal of one principal's sessions.
    let keys = Arc::new(SharedKeyring::new(Keyring::ephemeral()));
    let config = SessionsConfig {
        max_per_principal: 2,
        ..SessionsConfig::default()
    };
    let a = Sessions::new(
        keys.clone(),
        config.clone(),
        "a".into(),
        None,
        Default::default(),
    );
    let b = Sessions::new(keys, config, "b".into(), None, Default::default());
    let mut ids = Vec::new();
    for _ in 0..5 {
        let (id, session) = a.open(opening("alice")).unwrap();
        b.find(&id, "r", "alice").unwrap();
        a.end(&session);
        ids.push(id);
    }
    assert_eq!(b.len(), 2, "B holds at most max_per_principal of alice's");
    // Bob still gets in on B.
    b.open(opening("bob")).unwrap();
}

#[tokio::test]
async fn without_auth_the_anonymous_principal_is_bounded_by_max_total_only() {
    let s = sessions(SessionsConfig {
        max_per_principal: 2,
        max_total: 5,
        ..SessionsConfig::default()
    });
    s.set_open_to_all(true);
    for _ in 0..5 {
        s.open(opening("anonymous")).unwrap();
    }
    assert_eq!(
        s.len(),
        5,
        "max_per_principal does not apply to the one anonymous caller"
    );
    // At max_total the least recently used makes room: nobody is locked out.
    s.open(opening("anonymous")).unwrap();
    assert_eq!(s.len(), 5);
    // With [auth], a principal named anonymous is bounded like any other.
    let t = sessions(SessionsConfig {
        max_per_principal: 2,
        ..SessionsConfig::default()
    });
    for _ in 0..4 {
        t.open(opening("anonymous")).unwrap();
    }
    assert_eq!(t.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn an_idle_session_ends_and_one_with_a_call_in_flight_does_not() {
    let s = sessions(SessionsConfig {
        idle_timeout: Duration::from_secs(60),
        ..SessionsConfig::default()
    });
    let (idle_id, _) = s.open(opening("alice")).unwrap();
    let (busy_id, busy) = s.open(opening("alice")).unwrap();
    let _call = busy.call("1".into());
    tokio::time::sleep(Duration::from_secs(61 + REAP_EVERY.as_secs())).await;
    assert_eq!(
        s.find(&idle_id, "r", "alice").unwrap_err(),
        SessionError::Unknown
    );
    assert!(s.find(&busy_id, "r", "alice").is_ok());
}

#[test]
fn a_long_client_info_is_cut_to_its_name_and_version() {
    let long = json!({"name": "n", "version": "1", "description": "x".repeat(5000)});
    assert_eq!(
        short_client_info(long),
        json!({"name": "n", "version": "1"})
    );
}
