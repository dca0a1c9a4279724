//! Reusable body buffers of a shard, so that steady traffic allocates none.
//!
//! [`BufferPool::take`] lends a buffer as a [`PooledBuffer`], which goes back to its pool when
//! dropped, whatever way the request ends (an error, an early return, a panic). A buffer
//! grown past `kept_bytes_max`, or one more than `kept_max` idle buffers, is freed instead,
//! so the pool holds at most `kept_max × kept_bytes_max` bytes. And what a burst left behind
//! goes back to the allocator: [`BufferPool::trim`] (the shard's janitor, every
//! `limits::IDLE_RETURN_MS`) frees the buffers no request took since the last trim.
//!
//! [`JsonBuffers`] keeps simd-json's own working buffers (its aligned copy of the input, the
//! structural indexes, the parser's stack) between the JSON bodies of a shard: without them,
//! each parse allocated and freed four of them.

use std::cell::{Cell, RefCell};
use std::ops::{Deref, DerefMut};

/// Text bodies: many small buffers.
pub const TEXT_BUFFERS_KEPT: usize = 64;
pub const TEXT_BUFFER_BYTES_KEPT: usize = 1 << 20;
/// Image bodies: a few buffers of up to an image's size (15 MB) plus a form's fields.
pub const IMAGE_BUFFERS_KEPT: usize = 4;
pub const IMAGE_BUFFER_BYTES_KEPT: usize = 16 << 20;

pub struct BufferPool {
    free: RefCell<Vec<Vec<u8>>>,
    /// The fewest idle buffers since the last trim: that many were not needed.
    idle_low: Cell<usize>,
    /// Buffers kept at most.
    kept_max: usize,
    /// The largest capacity worth keeping.
    kept_bytes_max: usize,
}

impl BufferPool {
    pub fn new(kept_max: usize, kept_bytes_max: usize) -> Self {
        BufferPool {
            free: RefCell::new(Vec::new()),
            idle_low: Cell::new(0),
            kept_max,
            kept_bytes_max,
        }
    }

    /// An empty buffer, back in the pool when dropped.
    pub fn take(&self) -> PooledBuffer<'_> {
        let mut free = self.free.borrow_mut();
        let buffer = free.pop().unwrap_or_default();
        self.idle_low.set(self.idle_low.get().min(free.len()));
        PooledBuffer { buffer, pool: self }
    }

    /// Frees the idle buffers that no request needed since the last trim (the pool is a
    /// stack, so those are at its bottom).
    pub fn trim(&self) {
        let mut free = self.free.borrow_mut();
        let unneeded = self.idle_low.get().min(free.len());
        free.drain(..unneeded);
        self.idle_low.set(free.len());
    }

    fn give(&self, mut buffer: Vec<u8>) {
        let mut free = self.free.borrow_mut();
        if free.len() < self.kept_max && buffer.capacity() <= self.kept_bytes_max {
            buffer.clear();
            free.push(buffer);
        }
    }

    /// Idle buffers in the pool.
    pub fn idle(&self) -> usize {
        self.free.borrow().len()
    }
}

/// JSON bodies up to this size are parsed in the shard's kept simd-json buffers; a larger one
/// gets buffers of its own, freed after it. What a shard keeps stays under about six times this
/// (a copy of the input, its unescaped strings, and 4 bytes per structural character).
pub const JSON_BYTES_KEPT: usize = 64 * 1024;

/// simd-json's working buffers, kept by a shard between JSON bodies (see the module doc).
#[derive(Default)]
pub struct JsonBuffers {
    kept: RefCell<simd_json::Buffers>,
}

impl JsonBuffers {
    /// `body` parsed in place as a `T` (strings are unescaped in `body` and borrowed from it).
    pub fn parse<'b, T: serde::Deserialize<'b>>(&self, body: &'b mut [u8]) -> simd_json::Result<T> {
        match self.kept.try_borrow_mut() {
            Ok(mut kept) if body.len() <= JSON_BYTES_KEPT => {
                simd_json::serde::from_slice_with_buffers(body, &mut kept)
            }
            _ => simd_json::serde::from_slice(body),
        }
    }
}

/// A buffer lent by a [`BufferPool`]. To hand the bytes to another thread and back (the model
/// worker), move them out with `std::mem::take(&mut *buffer)` and put them back the same way.
pub struct PooledBuffer<'p> {
    buffer: Vec<u8>,
    pool: &'p BufferPool,
}

impl Deref for PooledBuffer<'_> {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.buffer
    }
}

impl DerefMut for PooledBuffer<'_> {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.buffer
    }
}

impl Drop for PooledBuffer<'_> {
    fn drop(&mut self) {
        self.pool.give(std::mem::take(&mut self.buffer));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_dropped_and_large_ones_are_freed() {
        let pool = BufferPool::new(2, 1024);
        {
            let mut a = pool.take();
            a.extend_from_slice(b"hello");
            let mut b = pool.take();
            b.reserve(4096);
        }
        assert_eq!(
            pool.idle(),
            1,
            "the small one came back, the large one was freed"
        );
        let again = pool.take();
        assert!(again.is_empty(), "a buffer comes back cleared");
        assert!(again.capacity() >= 5);
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _lent = pool.take();
            panic!("a request fails");
        }));
        assert!(result.is_err());
        drop(again);
        assert_eq!(pool.idle(), 2, "a buffer comes back on unwind too");
    }

    #[test]
    fn trimming_frees_the_buffers_not_taken_since_the_last_trim() {
        let pool = BufferPool::new(4, 1024);
        {
            let _held: Vec<_> = (0..3).map(|_| pool.take()).collect();
        }
        assert_eq!(pool.idle(), 3);
        pool.trim();
        assert_eq!(pool.idle(), 3, "all three were taken in this window");
        drop(pool.take());
        pool.trim();
        assert_eq!(
            pool.idle(),
            1,
            "one was needed since the last trim, two were not"
        );
        pool.trim();
        assert_eq!(pool.idle(), 0, "and none since");
    }
}
