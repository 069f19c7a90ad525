//! The rooms of the seed story and their bookings (in memory, for the
//! lifetime of the process).

use std::collections::BTreeMap;

pub(crate) struct Room {
    pub(crate) id: &'static str,
    pub(crate) name: &'static str,
    pub(crate) seats: u32,
    /// Loose words a hint may use. They narrow a question, never answer it.
    pub(crate) keywords: &'static [&'static str],
}

pub(crate) const ROOMS: [Room; 3] = [
    Room {
        id: "atrium",
        name: "The Atrium",
        seats: 24,
        keywords: &["big", "large", "atrium"],
    },
    Room {
        id: "studio-b",
        name: "Studio B",
        seats: 12,
        keywords: &["big", "studio"],
    },
    Room {
        id: "nook",
        name: "The Nook",
        seats: 4,
        keywords: &["small", "little", "nook"],
    },
];
pub(crate) const ROOM_IDS: &str = "atrium, studio-b, nook";

pub(crate) fn room_by_id(id: &str) -> Option<&'static Room> {
    ROOMS.iter().find(|room| room.id == id)
}

/// A hint resolves only if it is exactly one room's id or name (ignoring case).
/// Otherwise the rooms it loosely mentions come back.
pub(crate) fn resolve_hint(hint: &str) -> Result<&'static Room, Vec<&'static Room>> {
    let hint = hint.trim().to_lowercase();
    if let Some(room) = ROOMS
        .iter()
        .find(|r| r.id == hint || r.name.to_lowercase() == hint)
    {
        return Ok(room);
    }
    Err(ROOMS
        .iter()
        .filter(|r| r.keywords.iter().any(|k| hint.contains(k)))
        .collect())
}

pub(crate) struct Booking {
    pub(crate) room: &'static Room,
    pub(crate) day: String,
    pub(crate) hour: u32,
}

/// The bookings and the next id (kept by `store::Store`).
pub(crate) struct State {
    pub(crate) bookings: BTreeMap<String, Booking>,
    pub(crate) next_id: u32,
}

impl State {
    pub(crate) fn taken(&self, room: &Room, day: &str, hour: u32) -> Option<String> {
        let same_slot = |b: &Booking| b.room.id == room.id && b.day == day && b.hour == hour;
        self.bookings
            .iter()
            .find(|(_, b)| same_slot(b))
            .map(|(id, _)| id.clone())
    }

    pub(crate) fn free_rooms(&self, day: &str, hour: u32) -> Vec<&'static Room> {
        let free = |room: &&Room| self.taken(room, day, hour).is_none();
        ROOMS.iter().filter(free).collect()
    }

    pub(crate) fn next_id(&mut self, prefix: &str) -> String {
        self.next_id += 1;
        format!("{prefix}-{}", self.next_id - 1)
    }

    pub(crate) fn book(&mut self, room: &'static Room, day: &str, hour: u32) -> String {
        let id = self.next_id("bk");
        let day = day.to_owned();
        self.bookings
            .insert(id.clone(), Booking { room, day, hour });
        id
    }
}
