//! A kernel's arguments packed for `cuLaunchKernelEx`. Only the parameter structs of the
//! signature table (super) push into it, field by field in the order of the `.cu`
//! declaration, so a launcher cannot push an argument out of place or of the wrong kind.

use crate::device_ptr::DevicePtr;

/// Most parameters a kernel of this crate takes (attention decode has 16).
pub(in crate::launchers) const MAX_PARAMS: usize = 24;

/// Up to [`MAX_PARAMS`] kernel arguments, each in an 8-byte slot (the driver reads each
/// parameter's own size from the front of its slot: little-endian, so narrower values sit
/// there).
pub(in crate::launchers) struct Args {
    slots: [u64; MAX_PARAMS],
    len: usize,
}

impl Args {
    pub(super) fn new() -> Self {
        Args {
            slots: [0; MAX_PARAMS],
            len: 0,
        }
    }

    /// The table asserts at compile time that no kernel has more than `MAX_PARAMS`.
    fn push(&mut self, bits: u64) {
        self.slots[self.len] = bits;
        self.len += 1;
    }

    pub(super) fn ptr(&mut self, p: DevicePtr) {
        self.push(p.raw());
    }

    /// A pointer the kernel checks for NULL: `None` is passed as 0.
    pub(super) fn nullable_ptr(&mut self, p: Option<DevicePtr>) {
        self.push(DevicePtr::raw_or_null(p));
    }

    /// A size or count the kernel takes as an `int`: an error, not a wrapped value, when it
    /// does not fit.
    pub(super) fn count(&mut self, v: usize, param: &str) -> anyhow::Result<()> {
        let v = i32::try_from(v)
            .map_err(|_| anyhow::anyhow!("{param} = {v} does not fit the kernel's int"))?;
        self.i32(v);
        Ok(())
    }

    pub(super) fn i32(&mut self, v: i32) {
        self.push(v as u32 as u64);
    }

    pub(super) fn f32(&mut self, v: f32) {
        self.push(v.to_bits() as u64);
    }

    pub(super) fn u64(&mut self, v: u64) {
        self.push(v);
    }

    /// The slots and how many of them are arguments, for the launch's parameter array.
    pub(in crate::launchers) fn into_slots(self) -> ([u64; MAX_PARAMS], usize) {
        (self.slots, self.len)
    }
}
