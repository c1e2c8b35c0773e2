//! The correlation table of requests in flight, keyed by request id.
//!
//! Hosts number their requests 0, 1, 2…, and a pipelining host keeps thousands in flight. A
//! hash map scatters consecutive ids over the whole table, and the table is written by the
//! thread that reads the host and read back by the thread that reads the server, so every insert
//! and every remove moved cache lines between the two cores (about 17 % of all the CPU samples
//! of a run of 200,000 pipelined pings, a quarter of mcpguard's own). Here integer ids that
//! arrive in ascending order sit in a ring of slots, one after another in memory, which both
//! threads walk in order; any other id (a string, an id far from the ones in flight, a table
//! past its ring's size) goes to an ordinary hash map. Which part holds an id never changes what
//! the table answers: every id is in at most one part, and the operations mean exactly what a
//! `HashMap`'s do (the unit test holds the two to the same results over random operations).
//!
//! Knows ids and slots only: nothing of what is pending or why.

use std::collections::VecDeque;

use super::message::{Id, IdMap};

/// Most slots in the ring. Ids beyond it go to the hash map, so a request that is never
/// answered keeps at most this many empty slots alive (each is the size of one `Option<V>`).
const RING_MAX: usize = 4096;

/// Most empty slots added at once to reach an id ahead of the ring's end (a host that skips a
/// few numbers still stays in the ring).
const GAP_MAX: usize = 64;

/// A map from request id to `V`.
#[derive(Debug)]
pub struct IdTable<V> {
    /// Slot `i` holds integer id `base + i`; `None` when that id is not in flight.
    ring: VecDeque<Option<V>>,
    base: i64,
    /// Occupied slots of the ring.
    in_ring: usize,
    /// Every other id. None of its integer keys lies in the ring's range.
    other: IdMap<V>,
}

impl<V> Default for IdTable<V> {
    fn default() -> Self {
        IdTable {
            ring: VecDeque::new(),
            base: 0,
            in_ring: 0,
            other: IdMap::default(),
        }
    }
}

impl<V> IdTable<V> {
    /// The ring slot of integer id `n`, when the ring's range holds it.
    #[inline]
    fn slot(&self, n: i64) -> Option<usize> {
        let offset = usize::try_from(n.checked_sub(self.base)?).ok()?;
        (offset < self.ring.len()).then_some(offset)
    }

    /// Adds `value` under `id`, returning the value it replaced.
    pub fn insert(&mut self, id: Id, value: V) -> Option<V> {
        let Id::Int(n) = id else {
            return self.other.insert(id, value);
        };
        if let Some(i) = self.slot(n) {
            let old = self.ring[i].replace(value);
            if old.is_none() {
                self.in_ring += 1;
            }
            return old;
        }
        if !self.other.is_empty() && self.other.contains_key(&id) {
            return self.other.insert(id, value);
        }
        if self.ring.is_empty() {
            self.base = n;
        }
        // How many slots the ring grows by to reach `n`, if `n` is just past its end.
        let grow = n
            .checked_sub(self.base)
            .and_then(|offset| usize::try_from(offset).ok())
            .and_then(|offset| offset.checked_sub(self.ring.len()))
            .filter(|gap| *gap < GAP_MAX && self.ring.len() + gap < RING_MAX)
            .map(|gap| gap + 1);
        let Some(grow) = grow else {
            return self.other.insert(id, value);
        };
        let start = self.ring.len();
        self.ring.resize_with(start + grow, || None);
        self.in_ring += 1;
        *self.ring.back_mut()? = Some(value);
        // The ring now covers ids the hash map may hold: move them, so every id stays in one
        // part only. The map is almost always empty, so this costs nothing then.
        if !self.other.is_empty() {
            for i in start..start + grow - 1 {
                if let Some(v) = self.other.remove(&Id::Int(self.base + i as i64)) {
                    self.ring[i] = Some(v);
                    self.in_ring += 1;
                }
            }
        }
        None
    }

    /// Removes and returns the value under `id`.
    pub fn remove(&mut self, id: &Id) -> Option<V> {
        let slot = match id {
            Id::Int(n) => self.slot(*n),
            Id::Str(_) => None,
        };
        let Some(i) = slot else {
            return self.other.remove(id);
        };
        let value = self.ring[i].take()?;
        self.in_ring -= 1;
        if self.in_ring == 0 {
            self.ring.clear();
        } else {
            // Answered requests at the front free their slots, so the ring follows the ids.
            while let Some(None) = self.ring.front() {
                self.ring.pop_front();
                self.base += 1;
            }
        }
        Some(value)
    }

    pub fn get(&self, id: &Id) -> Option<&V> {
        match id {
            Id::Int(n) => match self.slot(*n) {
                Some(i) => self.ring[i].as_ref(),
                None => self.other.get(id),
            },
            Id::Str(_) => self.other.get(id),
        }
    }

    pub fn contains_key(&self, id: &Id) -> bool {
        self.get(id).is_some()
    }

    pub fn len(&self) -> usize {
        self.in_ring + self.other.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every id in flight with its value, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (Id, &V)> {
        let base = self.base;
        self.ring
            .iter()
            .enumerate()
            .filter_map(move |(i, v)| Some((Id::Int(base + i as i64), v.as_ref()?)))
            .chain(self.other.iter().map(|(id, v)| (id.clone(), v)))
    }

    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.ring.iter().flatten().chain(self.other.values())
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.ring
            .iter_mut()
            .flatten()
            .chain(self.other.values_mut())
    }

    /// Empties the table, returning everything it held, in no particular order.
    pub fn drain(&mut self) -> Vec<(Id, V)> {
        let base = self.base;
        let mut all: Vec<(Id, V)> = std::mem::take(&mut self.ring)
            .into_iter()
            .enumerate()
            .filter_map(|(i, v)| Some((Id::Int(base + i as i64), v?)))
            .collect();
        all.extend(self.other.drain());
        self.in_ring = 0;
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), so a failure repeats.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Ids the way peers send them: mostly ascending integers, some out of order, some far
    /// away, at the ends of the range, and strings.
    fn some_id(rng: &mut Rng, next: &mut i64) -> Id {
        match rng.below(20) {
            0..=11 => {
                *next = next.wrapping_add(1);
                Id::Int(*next)
            }
            12..=14 => Id::Int(next.wrapping_sub(rng.below(80) as i64)),
            15 => Id::Int(next.wrapping_add(rng.below(200) as i64)),
            16 => Id::Int([i64::MIN, i64::MAX, -1, 0][rng.below(4) as usize]),
            17 => Id::Int(rng.next() as i64),
            _ => Id::Str(format!("s{}", rng.below(50))),
        }
    }

    #[test]
    fn answers_exactly_what_a_hash_map_answers() {
        for seed in 1..=40u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            let mut table = IdTable::default();
            let mut model: IdMap<u64> = IdMap::default();
            let mut next = [0i64, -100, i64::MAX - 3000, i64::MIN][seed as usize % 4];
            for step in 0..20_000u64 {
                let id = some_id(&mut rng, &mut next);
                match rng.below(10) {
                    0..=4 => assert_eq!(
                        table.insert(id.clone(), step),
                        model.insert(id.clone(), step),
                        "insert {id:?}"
                    ),
                    5..=8 => assert_eq!(table.remove(&id), model.remove(&id), "remove {id:?}"),
                    _ => assert_eq!(table.get(&id), model.get(&id), "get {id:?}"),
                }
                assert_eq!(table.len(), model.len());
                assert_eq!(table.contains_key(&id), model.contains_key(&id));
            }
            let mut all: Vec<(Id, u64)> = table.iter().map(|(id, v)| (id, *v)).collect();
            let mut want: Vec<(Id, u64)> = model.iter().map(|(id, v)| (id.clone(), *v)).collect();
            all.sort_by_key(|(id, _)| id.to_string());
            want.sort_by_key(|(id, _)| id.to_string());
            assert_eq!(all, want, "seed {seed}");
            for v in table.values_mut() {
                *v += 1;
            }
            let mut drained = table.drain();
            drained.sort_by_key(|(id, _)| id.to_string());
            let bumped: Vec<(Id, u64)> = want.into_iter().map(|(id, v)| (id, v + 1)).collect();
            assert_eq!(drained, bumped, "seed {seed}");
            assert!(table.is_empty());
        }
    }

    #[test]
    fn ascending_ids_stay_in_the_ring_and_an_unanswered_one_bounds_it() {
        let mut table = IdTable::default();
        for n in 0..10_000 {
            table.insert(Id::Int(n), ());
            if n >= 100 {
                assert_eq!(table.remove(&Id::Int(n - 100)), Some(()));
            }
        }
        assert!(
            table.other.is_empty(),
            "a pipelining host's ids all fit the ring"
        );
        assert_eq!(table.ring.len(), 100);
        // One request never answered: the ring stops at its size and the rest is hashed.
        let mut table = IdTable::default();
        table.insert(Id::Int(0), ());
        for n in 1..10_000 {
            table.insert(Id::Int(n), ());
            assert_eq!(table.remove(&Id::Int(n)), Some(()));
        }
        assert!(table.ring.len() <= RING_MAX);
        assert_eq!(table.len(), 1);
        assert!(table.contains_key(&Id::Int(0)));
    }
}
