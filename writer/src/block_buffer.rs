//! Buffers of log blocks kept once their files were stored, for the next
//! blocks of the same client's commits.

/// The smallest buffer a data block starts in.
pub(crate) const MIN_BLOCK_BUFFER: usize = 16 << 10;

/// Buffers of data blocks, kept once their files were stored: memory in
/// use already costs less than fresh pages.
#[derive(Debug, Default)]
pub(crate) struct BlockBuffers {
    /// The buffers kept, and their capacities' sum.
    kept: std::sync::Mutex<(Vec<Vec<u8>>, usize)>,
}

impl BlockBuffers {
    /// An empty block buffer of at least `want` bytes: a kept one, else a
    /// new one.
    pub(crate) fn take(&self, want: usize) -> Vec<u8> {
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (buffers, held) = &mut *kept;
        match buffers.iter().rposition(|b| b.capacity() >= want) {
            Some(i) => {
                let b = buffers.swap_remove(i);
                *held -= b.capacity();
                b
            }
            None => Vec::with_capacity(want),
        }
    }

    /// Keeps the buffer of a stored block's `bytes` when nothing else holds
    /// them, it is not too small to start a block in, and the kept ones
    /// stay within `limit` bytes.
    pub(crate) fn keep(&self, bytes: bytes::Bytes, limit: usize) {
        let Ok(mut b) = bytes.try_into_mut() else { return };
        // Emptied first, so that taking the vector back copies nothing.
        b.clear();
        let buffer = Vec::from(b);
        if buffer.capacity() < MIN_BLOCK_BUFFER {
            return;
        }
        let mut kept = self.kept.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let (buffers, held) = &mut *kept;
        if *held + buffer.capacity() <= limit {
            *held += buffer.capacity();
            buffers.push(buffer);
        }
    }
}
