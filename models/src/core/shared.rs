//! Values held without copying them: [`CopyOnWrite`] parts of a state, shared by the states of an
//! exhaustive exploration until one changes them; [`ByContent`], one of those hashed by content for
//! the trace hash; and [`Fixed`] values, set up once for a run (a configuration) and shared by
//! every copy of the components that hold them.

use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A part of a state shared by the states that have not changed it (copy on write: a step clones only
/// what it touches), with its hash kept once computed. Exploring a bound clones and hashes a whole
/// world per successor; most of a world is the same as its predecessor's.
#[derive(Clone, Debug)]
pub struct CopyOnWrite<T>(Arc<Inner<T>>);

/// The value and its hash, `0` until computed (a computed `0` is kept as `1`). Two threads may
/// both compute it; they store the same number.
#[derive(Debug)]
struct Inner<T> {
    value: T,
    hash: AtomicU64,
}

impl<T: Clone> Clone for Inner<T> {
    fn clone(&self) -> Inner<T> {
        // A copy is made to be changed: its hash is computed again when asked.
        Inner { value: self.value.clone(), hash: AtomicU64::new(0) }
    }
}

impl<T: Clone> CopyOnWrite<T> {
    pub fn new(value: T) -> CopyOnWrite<T> {
        CopyOnWrite(Arc::new(Inner { value, hash: AtomicU64::new(0) }))
    }

    /// The value: taken out when this is its only holder, copied otherwise.
    pub fn into_inner(self) -> T {
        match Arc::try_unwrap(self.0) {
            Ok(inner) => inner.value,
            Err(shared) => shared.value.clone(),
        }
    }

    /// The component to change: this state's own copy, its cached hash forgotten.
    pub fn get_mut(&mut self) -> &mut T {
        let inner = Arc::make_mut(&mut self.0);
        *inner.hash.get_mut() = 0;
        &mut inner.value
    }
}

/// Copies of shared parts, by the part they copy, so that parts shared before stay shared after
/// (see [`CopyOnWrite::rehome`]). Each part copied is kept beside its copy, so that no address is
/// freed and reused as a key while copying.
#[allow(clippy::type_complexity)]
pub struct Copies<T>(std::collections::BTreeMap<usize, (CopyOnWrite<T>, CopyOnWrite<T>)>);

impl<T> Default for Copies<T> {
    fn default() -> Self {
        Copies(std::collections::BTreeMap::new())
    }
}

impl<T: Clone> CopyOnWrite<T> {
    /// Replaces this part by a copy of its own, the same copy for every part in `copies` that
    /// shared it before. A thread that takes states over from another rehomes them: the states it
    /// goes on to generate then share parts whose reference counts only it touches, instead of
    /// moving the counts' cache line between the cores on every copy and drop of a state.
    pub fn rehome(&mut self, copies: &mut Copies<T>) {
        let key = Arc::as_ptr(&self.0) as usize;
        let (_, copy) = copies.0.entry(key).or_insert_with(|| {
            // The same content: its hash, if known, stays.
            let hash = AtomicU64::new(self.0.hash.load(Ordering::Relaxed));
            (self.clone(), CopyOnWrite(Arc::new(Inner { value: self.0.value.clone(), hash })))
        });
        *self = copy.clone();
    }
}

impl<T> std::ops::Deref for CopyOnWrite<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T: std::hash::Hash> std::hash::Hash for CopyOnWrite<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // aHash with fixed keys (as stateright's own fingerprints): the same component hashes the
        // same in every run.
        let mut hash = self.0.hash.load(Ordering::Relaxed);
        if hash == 0 {
            hash = ahash::RandomState::with_seeds(0x68616e64, 0x6f6666, 0x776f726c64, 0x7368617265)
                .hash_one(&self.0.value)
                .max(1);
            self.0.hash.store(hash, Ordering::Relaxed);
        }
        state.write_u64(hash);
    }
}

impl<T: PartialEq> PartialEq for CopyOnWrite<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

impl<T: Eq> Eq for CopyOnWrite<T> {}

impl<T: Serialize> Serialize for CopyOnWrite<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de> + Clone> Deserialize<'de> for CopyOnWrite<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(CopyOnWrite::new)
    }
}

/// A shared value that hashes by its content, whatever hasher asks: for what the trace hash
/// covers (an observation's committed transaction), which must not depend on aHash's output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ByContent<T: Clone>(pub CopyOnWrite<T>);

impl<T: Clone> std::ops::Deref for ByContent<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone + std::hash::Hash> std::hash::Hash for ByContent<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (*self.0).hash(state);
    }
}

/// A value fixed when a run is set up and never changed by it (a component's configuration, the
/// captured tables; not the workload, which differs per seed), held by a plain reference: copying a component that holds
/// one touches no reference count. With two threads exploring, every state's components share
/// the same configurations, and the counts of a shared `Arc` move its cache line between the
/// cores on every copy and every drop.
///
/// Values are interned: the first of each distinct value lives until the process ends and every
/// equal value is that one, so a process that sets up the same scenario many times keeps one copy,
/// and equality is identity. The table is bounded by the distinct configurations a process sets
/// up (a few hundred bytes each: a sweep's variants, a test binary's scenarios), never by its runs
/// or seeds ([`interned_values`]). Freeing a value would need a count or a lifetime on every
/// holder, which is what this type exists to avoid.
pub struct Fixed<T: 'static>(&'static FixedInner<T>);

struct FixedInner<T> {
    value: T,
    /// The content's hash (aHash with fixed keys, as `CopyOnWrite`), computed once.
    hash: u64,
}

type Interned = std::collections::BTreeMap<(std::any::TypeId, u64), Vec<&'static (dyn std::any::Any + Send + Sync)>>;

static INTERNED: std::sync::Mutex<Interned> = std::sync::Mutex::new(std::collections::BTreeMap::new());

impl<T: std::hash::Hash + Eq + Send + Sync + 'static> Fixed<T> {
    pub fn new(value: T) -> Fixed<T> {
        let hash = ahash::RandomState::with_seeds(0x68616e64, 0x6f6666, 0x6669786564, 0x76616c7565).hash_one(&value);
        // A poisoned lock only means another thread panicked while interning; the table itself is
        // never left half-changed (one push).
        let mut interned = INTERNED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let same = interned.entry((std::any::TypeId::of::<T>(), hash)).or_default();
        for candidate in same.iter() {
            if let Some(inner) = candidate.downcast_ref::<FixedInner<T>>()
                && inner.value == value
            {
                return Fixed(inner);
            }
        }
        let inner: &'static FixedInner<T> = Box::leak(Box::new(FixedInner { value, hash }));
        same.push(inner);
        Fixed(inner)
    }
}

/// How many distinct values are interned in this process, of every type. The table grows with the
/// distinct configurations a process sets up, never with the runs: running a scenario again, at
/// any seed, interns nothing new (a test in `handoff-sim` holds it to that).
pub fn interned_values() -> usize {
    let interned = INTERNED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    interned.values().map(Vec::len).sum()
}

impl<T> Clone for Fixed<T> {
    fn clone(&self) -> Fixed<T> {
        *self
    }
}

impl<T> Copy for Fixed<T> {}

impl<T> std::ops::Deref for Fixed<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Fixed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.value.fmt(f)
    }
}

impl<T> std::hash::Hash for Fixed<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl<T> PartialEq for Fixed<T> {
    /// Interned: equal values are the same value.
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl<T> Eq for Fixed<T> {}

impl<T: Serialize> Serialize for Fixed<T> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.value.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de> + std::hash::Hash + Eq + Send + Sync + 'static> Deserialize<'de> for Fixed<T> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        T::deserialize(deserializer).map(Fixed::new)
    }
}

#[cfg(test)]
mod tests {
    use super::{Copies, CopyOnWrite, Fixed};
    use std::hash::BuildHasher;

    #[test]
    fn rehomed_parts_stay_shared_among_themselves_and_equal_to_what_they_copied() {
        let original = CopyOnWrite::new(vec![1u32, 2, 3]);
        let other = CopyOnWrite::new(vec![4u32]);
        let hasher = std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default();
        let hash_before = hasher.hash_one(&original);
        let (mut a, mut b, mut c) = (original.clone(), original.clone(), other.clone());
        let mut copies = Copies::default();
        a.rehome(&mut copies);
        b.rehome(&mut copies);
        c.rehome(&mut copies);
        assert!(std::ptr::eq(&*a, &*b), "parts shared before are shared after");
        assert!(!std::ptr::eq(&*a, &*original), "the copy is a part of its own");
        assert!(!std::ptr::eq(&*c, &*a));
        assert_eq!(a, original);
        assert_eq!(c, other);
        assert_eq!(hasher.hash_one(&a), hash_before, "the same content hashes the same");
        // A change to the copy leaves the original alone.
        a.get_mut().push(4);
        assert_eq!(*original, vec![1, 2, 3]);
        assert_eq!(*b, vec![1, 2, 3]);
    }

    #[test]
    fn fixed_values_are_interned_by_content() {
        let a = Fixed::new(vec![1u32, 2, 3]);
        let b = Fixed::new(vec![1u32, 2, 3]);
        let c = Fixed::new(vec![1u32, 2, 4]);
        assert!(std::ptr::eq(&*a, &*b), "equal values share one copy");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_eq!(*c, vec![1, 2, 4]);
        // The same content of another type is another value.
        let d = Fixed::new(vec![1u64, 2, 3]);
        assert_eq!(*d, vec![1u64, 2, 3]);
    }
}

/// A part only some runs have (a worker's group membership, Kafka's group coordinator), boxed,
/// and hashed as nothing when absent: a run without it keeps the fingerprints it had before
/// the part existed.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Optional<T>(pub Option<Box<T>>);

impl<T> Default for Optional<T> {
    fn default() -> Self {
        Optional(None)
    }
}

impl<T> Optional<T> {
    pub fn some(value: T) -> Optional<T> {
        Optional(Some(Box::new(value)))
    }
}

impl<T: std::hash::Hash> std::hash::Hash for Optional<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if let Some(value) = &self.0 {
            value.hash(state);
        }
    }
}

/// What a process keeps for its operators and never acts on: a metric (Debezium's JMX
/// meters, a partition's last append time). It is equal to and hashes like any other
/// `Meter`, whatever it holds, so the exhaustive lens's states do not multiply by a clock
/// reading no step depends on; the timed lens reads it for the health signals
/// ([`crate::judge::health`]).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct Meter<T>(pub T);

impl<T> PartialEq for Meter<T> {
    fn eq(&self, _: &Meter<T>) -> bool {
        true
    }
}

impl<T> Eq for Meter<T> {}

impl<T> std::hash::Hash for Meter<T> {
    fn hash<H: std::hash::Hasher>(&self, _: &mut H) {}
}
