//! The pinned staging ring a wave's upload streams through: a few pieces of page-locked
//! memory, each filled on the host and copied up on the copy stream while the host fills the
//! next. The ring's size is independent of the wave's: a wave of any size goes up piece by
//! piece, and the host waits only for a piece's previous copy before filling it again.

use crate::device::{Device, DeviceBuffer, Event, PinnedBuffer, Stream};
use crate::error::{Error, Result};

/// One piece of the ring and the event after its last copy.
#[derive(Debug)]
struct Piece {
    buf: PinnedBuffer,
    free: Option<Event>,
}

/// The pinned staging ring (see the module docs).
#[derive(Debug)]
pub(super) struct StagingRing {
    pieces: Vec<Piece>,
    next: usize,
}

/// Where an upload goes: bytes below `direct` to `direct_dst`, the rest to `dst`, each at its
/// own offset in the upload.
pub(super) struct UploadTarget<'a> {
    pub(super) dst: &'a DeviceBuffer,
    pub(super) direct: usize,
    pub(super) direct_dst: &'a DeviceBuffer,
}

impl StagingRing {
    /// `pieces` pieces of `piece_len` bytes.
    pub(super) fn new(device: &Device, piece_len: usize, pieces: usize) -> Result<Self> {
        let pieces = (0..pieces)
            .map(|_| Ok(Piece { buf: device.alloc_pinned(piece_len)?, free: None }))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { pieces, next: 0 })
    }

    fn piece_len(&self) -> usize {
        self.pieces.first().map_or(0, |p| p.buf.len())
    }

    /// Streams an upload of `len` bytes made of `segments` (each `(offset, bytes)`, sorted by
    /// offset, not overlapping; gaps between them are left as they are) through the ring:
    /// each piece is filled on the host (in parallel over segments, on `pool` if given) and
    /// copied on `copy` to `target`. Blocks only until a piece's previous copy finished.
    pub(super) fn upload(
        &mut self,
        copy: &Stream,
        segments: &[(usize, &[u8])],
        len: usize,
        target: &UploadTarget<'_>,
        pool: Option<&rayon::ThreadPool>,
    ) -> Result<()> {
        let piece_len = self.piece_len();
        if piece_len == 0 {
            return Err(Error::InvalidArgument("the staging ring has no pieces".into()));
        }
        let mut first = 0usize;
        let mut at = 0usize;
        while at < len {
            let end = (at + piece_len).min(len);
            let n_pieces = self.pieces.len();
            let piece = &mut self.pieces[self.next];
            self.next = (self.next + 1) % n_pieces;
            if let Some(free) = piece.free.take() {
                free.synchronize()?;
            }
            // SAFETY: the piece's last copy finished (`free` above) and no other is queued.
            let stage = unsafe { piece.buf.as_mut_slice() };
            fill(&mut stage[..end - at], at, &segments[first..], pool);
            while first < segments.len() && segments[first].0 + segments[first].1.len() <= end {
                first += 1;
            }
            // SAFETY (both copies): the buffers record the copies as uses (their drop waits for
            // them), and the host writes this piece again only after `free`, recorded below.
            let direct_end = target.direct.clamp(at, end);
            if direct_end > at {
                unsafe { copy.copy_to_device(&piece.buf, 0, target.direct_dst, at, direct_end - at)? };
            }
            if end > direct_end {
                unsafe { copy.copy_to_device(&piece.buf, direct_end - at, target.dst, direct_end, end - direct_end)? };
            }
            piece.free = Some(copy.record(false)?);
            at = end;
        }
        Ok(())
    }

    /// Waits until no copy uses any piece; the pieces are then the host's.
    pub(super) fn quiesce(&mut self) -> Result<()> {
        for p in &mut self.pieces {
            if let Some(free) = p.free.take() {
                free.synchronize()?;
            }
        }
        Ok(())
    }

    /// Two idle pieces to bounce device-to-host copies through, after [`Self::quiesce`]; `None`
    /// with fewer than two pieces.
    pub(super) fn bounce(&self) -> Option<(&PinnedBuffer, &PinnedBuffer)> {
        match self.pieces.as_slice() {
            [a, b, ..] => Some((&a.buf, &b.buf)),
            _ => None,
        }
    }
}

/// Copies the parts of `segments` that fall in `[at, at + stage.len())` into `stage`.
fn fill(stage: &mut [u8], at: usize, segments: &[(usize, &[u8])], pool: Option<&rayon::ThreadPool>) {
    use rayon::prelude::*;
    let end = at + stage.len();
    let mut parts: Vec<(&mut [u8], &[u8])> = Vec::new();
    let mut rest = stage;
    let mut rest_at = at;
    for &(off, bytes) in segments {
        if off >= end {
            break;
        }
        let (a, b) = (off.max(at), (off + bytes.len()).min(end));
        if a >= b {
            continue;
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(a - rest_at);
        let (head, tail) = tail.split_at_mut(b - a);
        parts.push((head, &bytes[a - off..b - off]));
        rest = tail;
        rest_at = b;
    }
    let copy = move || parts.into_par_iter().with_min_len(8).for_each(|(d, s)| d.copy_from_slice(s));
    match pool {
        Some(p) => p.install(copy),
        None => copy(),
    }
}

#[cfg(test)]
mod tests {
    use super::fill;

    #[test]
    fn fill_copies_the_overlapping_parts_only() {
        let a = [1u8; 10];
        let b = [2u8; 6];
        let segments: [(usize, &[u8]); 2] = [(0, &a), (16, &b)];
        let mut stage = [9u8; 12];
        fill(&mut stage, 8, &segments, None);
        assert_eq!(stage, [1, 1, 9, 9, 9, 9, 9, 9, 2, 2, 2, 2]);
    }
}
