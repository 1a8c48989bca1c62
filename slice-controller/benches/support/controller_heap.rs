//! The controller's heap, told apart from the rest of the process: a global
//! allocator that tags every block with who allocated it — a thread of the
//! controller's own runtime ([`enter_controller`]) or anything else (the
//! test API server, the bench's watch) — and counts the bytes live per tag.
//!
//! A block is charged to the tag of the thread that allocated it, whichever
//! thread frees it, so [`live`] is exactly the bytes the controller
//! allocated and still holds. It is the heap only: code, stacks and the
//! allocator's own overhead are not in it (the process's RSS is reported
//! beside it). The tag lives in a header before each block; `realloc`
//! keeps it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes before each block: the tag, and room for the block's alignment.
const HEADER: usize = 16;
const OTHER: u8 = 0;
const CONTROLLER: u8 = 1;

static LIVE: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
static PEAK: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // Const-initialised and without a destructor: readable from the
    // allocator at any point of a thread's life.
    static TAG: Cell<u8> = const { Cell::new(OTHER) };
}

/// From now on, what this thread allocates is the controller's (call it in
/// `on_thread_start` of the controller's runtime, and on the thread that
/// drives it).
pub fn enter_controller() {
    let _ = TAG.try_with(|t| t.set(CONTROLLER));
}

/// Bytes the controller allocated and still holds.
pub fn live() -> usize {
    LIVE[CONTROLLER as usize].load(Ordering::Relaxed)
}

/// The most [`live`] has been since the last [`reset_peak`].
pub fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// Start a new peak from what is live now.
pub fn reset_peak() {
    PEAK.store(live(), Ordering::Relaxed);
}

pub struct Tagged;

/// The padding before a block of `layout` and the layout asked of the
/// system allocator.
fn outer(layout: Layout) -> (usize, Layout) {
    let pad = layout.align().max(HEADER);
    // Cannot fail for a layout the caller could allocate plus a page.
    let outer = Layout::from_size_align(layout.size() + pad, pad).unwrap_or(layout);
    (pad, outer)
}

fn charge(tag: u8, bytes: usize) {
    let now = LIVE[tag as usize].fetch_add(bytes, Ordering::Relaxed) + bytes;
    if tag == CONTROLLER {
        PEAK.fetch_max(now, Ordering::Relaxed);
    }
}

fn credit(tag: u8, bytes: usize) {
    LIVE[tag as usize].fetch_sub(bytes, Ordering::Relaxed);
}

// SAFETY: every block is the system allocator's, `pad` bytes after the
// start of a block of `outer(layout)`, both recomputed from the same layout
// on free and realloc; the tag byte sits in the padding.
#[allow(unsafe_code)] // a global allocator is unsafe by nature; see SAFETY
unsafe impl GlobalAlloc for Tagged {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let (pad, outer) = outer(layout);
        let base = System.alloc(outer);
        if base.is_null() {
            return base;
        }
        let tag = TAG.try_with(Cell::get).unwrap_or(OTHER);
        let block = base.add(pad);
        *block.sub(1) = tag;
        charge(tag, layout.size());
        block
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let (pad, outer) = outer(layout);
        credit(*block.sub(1), layout.size());
        System.dealloc(block.sub(pad), outer);
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let (pad, outer) = outer(layout);
        let tag = *block.sub(1);
        let base = System.realloc(block.sub(pad), outer, new_size + pad);
        if base.is_null() {
            return base;
        }
        credit(tag, layout.size());
        charge(tag, new_size);
        base.add(pad)
    }
}
