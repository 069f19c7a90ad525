//! Handles on the members of a labelled metric family, found by their label
//! values without building owned labels, and a bound on how many members a
//! family may grow to when a label carries what clients send.
//!
//! `Family::get_or_create` takes an owned label set: every call allocated
//! each label value and SipHashed them under the family's lock (about 3k
//! instructions of a passthrough call over its three families). Here the
//! values are joined on the stack and looked up with foldhash; the family
//! is asked once per distinct label set.
//!
//! A label whose value a client chooses (a tool name a server could not
//! vouch for, a resource URI) must not grow a family without bound: each
//! member is kept, and rendered on every scrape, for the process's life.
//! Past [`Labelled::cap`] distinct sets, new ones are recorded under the
//! caller's overflow values (`tool="_other"`). Nor may one value be long:
//! [`shape`] bounds each such value's length (a 300 KiB URI once made every
//! scrape 3 MiB longer, for good), so a family's memory is bounded by its
//! cap times [`MAX_LABEL_BYTES`].

use std::borrow::Cow;
use std::sync::RwLock;

use sha2::{Digest, Sha256};

/// The longest label value a client's input becomes, in bytes.
pub const MAX_LABEL_BYTES: usize = 128;

/// Hex digits of the hash that ends a shortened value: 64 bits, so two
/// long values that share their first bytes still get distinct labels.
const HASH_HEX: usize = 16;

/// A label value from what a client sent, at most [`MAX_LABEL_BYTES`] long:
/// a value that fits is kept as it is; a longer one is cut (at a character
/// boundary) and ends with `~` and the first 64 bits of its SHA-256 in hex.
/// The same value always gives the same label, on every replica and after
/// a restart, so dashboards can still tell long values apart.
pub fn shape(value: &str) -> Cow<'_, str> {
    if value.len() <= MAX_LABEL_BYTES {
        return Cow::Borrowed(value);
    }
    let digest = Sha256::digest(value.as_bytes());
    let keep = MAX_LABEL_BYTES - 1 - HASH_HEX;
    let mut cut = keep;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut shaped = String::with_capacity(MAX_LABEL_BYTES);
    shaped.push_str(&value[..cut]);
    shaped.push('~');
    for b in &digest[..HASH_HEX / 2] {
        shaped.push_str(&format!("{b:02x}"));
    }
    Cow::Owned(shaped)
}

/// A family's members made so far, by their label values.
pub struct Labelled<M> {
    made: RwLock<foldhash::HashMap<Box<[u8]>, M>>,
    cap: usize,
}

/// Joins label values: 0xFF never occurs in UTF-8, so no two lists of
/// values join to the same key.
const SEPARATOR: u8 = 0xFF;

/// Keys up to this long are built on the stack.
const STACK_KEY: usize = 192;

impl<M> Labelled<M> {
    /// At most `cap` members (the overflow set is one more).
    pub fn new(cap: usize) -> Self {
        Labelled {
            made: RwLock::new(foldhash::HashMap::default()),
            cap,
        }
    }

    /// The most members made for distinct label sets.
    pub fn cap(&self) -> usize {
        self.cap
    }

    /// Runs `record` on the member for `values`, made by `make` the first
    /// time it is seen; once `cap` members exist, a new set of values is
    /// recorded on the member for `overflow` instead.
    pub fn with<R>(
        &self,
        values: &[&str],
        overflow: &[&str],
        make: impl Fn(&[&str]) -> M,
        record: impl FnOnce(&M) -> R,
    ) -> R {
        let mut stack = [0u8; STACK_KEY];
        let mut heap = Vec::new();
        let key = join(values, &mut stack, &mut heap);
        {
            let made = self
                .made
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(m) = made.get(key) {
                return record(m);
            }
        }
        let mut made = self
            .made
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if made.len() < self.cap {
            let m = made.entry(key.into()).or_insert_with(|| make(values));
            return record(m);
        }
        let mut stack = [0u8; STACK_KEY];
        let mut heap = Vec::new();
        let key = join(overflow, &mut stack, &mut heap);
        let m = made.entry(key.into()).or_insert_with(|| make(overflow));
        record(m)
    }
}

/// `values` joined by [`SEPARATOR`], in `stack` when they fit.
fn join<'a>(values: &[&str], stack: &'a mut [u8; STACK_KEY], heap: &'a mut Vec<u8>) -> &'a [u8] {
    let len = values.iter().map(|v| v.len() + 1).sum::<usize>();
    if len <= STACK_KEY {
        let mut at = 0;
        for v in values {
            stack[at..at + v.len()].copy_from_slice(v.as_bytes());
            stack[at + v.len()] = SEPARATOR;
            at += v.len() + 1;
        }
        &stack[..at]
    } else {
        for v in values {
            heap.extend_from_slice(v.as_bytes());
            heap.push(SEPARATOR);
        }
        heap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn short_values_are_kept_and_long_ones_cut_with_a_stable_hash() {
        assert!(matches!(shape("book_room"), Cow::Borrowed("book_room")));
        let exact = "x".repeat(MAX_LABEL_BYTES);
        assert_eq!(shape(&exact), exact.as_str());
        let long = format!("file:///{}", "a".repeat(300 * 1024));
        let shaped = shape(&long);
        assert_eq!(shaped.len(), MAX_LABEL_BYTES);
        assert!(long.starts_with(shaped.split('~').next().unwrap()));
        assert_eq!(shape(&long), shaped, "the same value, the same label");
        // Two long values that differ only past the cut stay apart.
        let other = format!("{long}b");
        assert_ne!(shape(&other), shaped);
        // A multi-byte character across the cut is never split.
        let wide = "é".repeat(MAX_LABEL_BYTES);
        let shaped = shape(&wide);
        assert!(shaped.len() <= MAX_LABEL_BYTES);
        assert!(shaped.starts_with('é') && shaped.contains('~'));
    }

    #[test]
    fn a_label_set_is_made_once_and_found_again() {
        let made = AtomicUsize::new(0);
        let family: Labelled<String> = Labelled::new(10);
        let make = |v: &[&str]| {
            made.fetch_add(1, Ordering::Relaxed);
            v.join("|")
        };
        for _ in 0..3 {
            let got = family.with(
                &["r", "t", "ok"],
                &["r", "_other", "ok"],
                make,
                Clone::clone,
            );
            assert_eq!(got, "r|t|ok");
        }
        assert_eq!(made.load(Ordering::Relaxed), 1);
        // Values that join differently are different members.
        let split = family.with(&["r", "tok"], &[], make, Clone::clone);
        let other = family.with(&["rt", "ok"], &[], make, Clone::clone);
        assert_eq!((split.as_str(), other.as_str()), ("r|tok", "rt|ok"));
    }

    #[test]
    fn past_the_cap_new_values_go_to_the_overflow_member() {
        let family: Labelled<String> = Labelled::new(2);
        let make = |v: &[&str]| v.join("|");
        for tool in ["a", "b"] {
            let got = family.with(&["r", tool], &["r", "_other"], make, Clone::clone);
            assert_eq!(got, format!("r|{tool}"));
        }
        for tool in ["c", "d", "e"] {
            let got = family.with(&["r", tool], &["r", "_other"], make, Clone::clone);
            assert_eq!(
                got, "r|_other",
                "a client cannot grow the family past its cap"
            );
        }
        // Members made before the cap are still theirs.
        assert_eq!(
            family.with(&["r", "a"], &["r", "_other"], make, Clone::clone),
            "r|a"
        );
        assert_eq!(
            family.made.read().unwrap().len(),
            3,
            "two members and the overflow"
        );
    }

    #[test]
    fn long_values_are_joined_on_the_heap_the_same_way() {
        let family: Labelled<String> = Labelled::new(4);
        let long = "x".repeat(STACK_KEY * 2);
        let make = |v: &[&str]| v.join("|");
        let first = family.with(&["r", &long], &[], make, Clone::clone);
        let again = family.with(&["r", &long], &[], make, Clone::clone);
        assert_eq!(first, again);
        assert_eq!(family.made.read().unwrap().len(), 1);
    }
}
