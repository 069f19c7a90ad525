//! Multi Round-Trip Requests: questions a legacy server pushes during a call,
//! turned into `InputRequiredResult` round trips the client answers by
//! retrying (spec 2026-07-28 `basic/patterns/mrtr.mdx`).
pub mod state;
