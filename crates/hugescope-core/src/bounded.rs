//! A log that stays bounded however long the run: per-interval records of
//! daemons (PCC reads, HawkEye rounds), timeline samples and executed plan
//! entries used to grow with virtual time (`--duration 1e9` with pcc passed
//! 13 GB). The first `head` items are kept, then the last `tail` in a ring;
//! the ones in between are counted in `dropped`. Below `head` items nothing
//! is dropped, so an ordinary run's records are exactly what they were.

use std::collections::VecDeque;

use serde::ser::{Serialize, SerializeSeq, Serializer};

#[derive(Clone, Debug)]
pub struct BoundedLog<T> {
    head: Vec<T>,
    tail: VecDeque<T>,
    head_cap: usize,
    tail_cap: usize,
    dropped: u64,
}

impl<T> BoundedLog<T> {
    /// Keep the first `head` items and the last `tail` (0: keep a prefix only).
    pub fn new(head: usize, tail: usize) -> Self {
        BoundedLog { head: Vec::new(), tail: VecDeque::new(), head_cap: head.max(1), tail_cap: tail, dropped: 0 }
    }

    pub fn push(&mut self, x: T) {
        if self.head.len() < self.head_cap {
            self.head.push(x);
        } else if self.tail_cap == 0 {
            self.dropped += 1;
        } else {
            if self.tail.len() == self.tail_cap {
                self.tail.pop_front();
                self.dropped += 1;
            }
            self.tail.push_back(x);
        }
    }

    /// Items pushed but not kept (0 unless the cap engaged).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Items kept.
    pub fn len(&self) -> usize {
        self.head.len() + self.tail.len()
    }

    pub fn is_empty(&self) -> bool {
        self.head.is_empty()
    }

    /// Kept items, in push order (the gap, if any, lies between head and tail).
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.head.iter().chain(self.tail.iter())
    }

    /// The kept prefix: every item while nothing was dropped.
    pub fn head(&self) -> &[T] {
        &self.head
    }

    pub fn to_vec(&self) -> Vec<T>
    where
        T: Clone,
    {
        self.iter().cloned().collect()
    }

    /// A sentence for the result's warnings when the cap engaged.
    pub fn warning(&self, what: &str) -> Option<String> {
        (self.dropped > 0).then(|| {
            format!(
                "{what}: {} entries were not kept (the first {} and the last {} are), to bound memory on a long run",
                self.dropped,
                self.head.len(),
                self.tail.len()
            )
        })
    }
}

/// Serialized as the plain list of kept items: identical to the `Vec` it
/// replaced while nothing was dropped.
impl<T: Serialize> Serialize for BoundedLog<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len()))?;
        for x in self.iter() {
            seq.serialize_element(x)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_head_and_tail_and_counts_the_gap() {
        let mut l = BoundedLog::new(3, 2);
        for i in 0..3 {
            l.push(i);
        }
        assert_eq!((l.to_vec(), l.dropped(), l.warning("x")), (vec![0, 1, 2], 0, None));
        for i in 3..10 {
            l.push(i);
        }
        assert_eq!(l.to_vec(), vec![0, 1, 2, 8, 9]);
        assert_eq!(l.dropped(), 5);
        assert_eq!(serde_json::to_string(&l).unwrap(), "[0,1,2,8,9]");
        let mut p = BoundedLog::new(2, 0);
        for i in 0..5 {
            p.push(i);
        }
        assert_eq!((p.head(), p.dropped()), (&[0, 1][..], 3));
        assert!(p.warning("plan").unwrap().contains("3 entries"));
    }
}
