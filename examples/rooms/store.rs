//! Where the bookings live. redmark runs a stdio server as several
//! processes (one per client capability profile, and in hold mode one per
//! question waiting for its answer), so state kept in one process's memory
//! is split across them: two clients could book the same room and hour.
//! With `ROOMS_STATE` naming a file, every process reads and writes the
//! bookings there, each change under an exclusive file lock; without it the
//! bookings live in this process's memory, as a throwaway server's would.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde_json::{Value, json};

use crate::catalogue::{Booking, ROOMS, State, room_by_id};

pub(crate) struct Store {
    file: Option<PathBuf>,
    /// This process's state without a file; with one, it orders this
    /// process's own changes before the file lock orders everyone's.
    memory: Mutex<State>,
}

/// The bookings a new store starts with: Studio B at 09:00 and The Nook at
/// 14:00 on 2026-09-17 (bk-1, bk-2).
fn seeded() -> State {
    let mut state = State {
        bookings: BTreeMap::new(),
        next_id: 1,
    };
    state.book(&ROOMS[1], "2026-09-17", 9);
    state.book(&ROOMS[2], "2026-09-17", 14);
    state
}

impl Store {
    /// `ROOMS_STATE` names the shared file, if set.
    pub(crate) fn from_env() -> Store {
        Store {
            file: std::env::var_os("ROOMS_STATE").map(PathBuf::from),
            memory: Mutex::new(seeded()),
        }
    }

    /// Runs `change` on the current state and keeps what it did.
    pub(crate) fn with<R>(&self, change: impl FnOnce(&mut State) -> R) -> R {
        let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(path) = &self.file else {
            return change(&mut memory);
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .unwrap_or_else(|e| panic!("rooms: cannot open ROOMS_STATE {}: {e}", path.display()));
        file.lock()
            .unwrap_or_else(|e| panic!("rooms: cannot lock {}: {e}", path.display()));
        let mut state = read(&mut file).unwrap_or_else(seeded);
        let out = change(&mut state);
        write(&mut file, &state)
            .unwrap_or_else(|e| panic!("rooms: cannot write {}: {e}", path.display()));
        // Dropping the file releases the lock.
        out
    }
}

/// The state in the file; `None` when it is new (empty).
fn read(file: &mut File) -> Option<State> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    let mut bookings = BTreeMap::new();
    for (id, b) in v["bookings"].as_object()? {
        let room = room_by_id(b["room"].as_str()?)?;
        let day = b["day"].as_str()?.to_owned();
        let hour = u32::try_from(b["hour"].as_u64()?).ok()?;
        bookings.insert(id.clone(), Booking { room, day, hour });
    }
    let next_id = u32::try_from(v["next_id"].as_u64()?).ok()?;
    Some(State { bookings, next_id })
}

fn write(file: &mut File, state: &State) -> std::io::Result<()> {
    let bookings: serde_json::Map<String, Value> = state
        .bookings
        .iter()
        .map(|(id, b)| {
            (
                id.clone(),
                json!({"room": b.room.id, "day": b.day, "hour": b.hour}),
            )
        })
        .collect();
    let text = json!({"next_id": state.next_id, "bookings": bookings}).to_string();
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())?;
    file.flush()
}
