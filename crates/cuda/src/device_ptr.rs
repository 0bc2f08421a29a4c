//! `DevicePtr`: a device address, typed so that it cannot be mixed up with a size or an offset.
//! Kernels take raw addresses; a `DevicePtr` becomes one only where a kernel or a library call
//! is launched, and a nullable argument is an `Option<DevicePtr>` there, `None` passed as 0.

/// An address in device memory (what `cudaMalloc` returns, or a byte offset into it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct DevicePtr(u64);

impl DevicePtr {
    /// Wraps an address returned by the driver.
    pub const fn from_raw(address: u64) -> DevicePtr {
        DevicePtr(address)
    }

    /// The address, for a kernel argument or a driver call.
    pub const fn raw(self) -> u64 {
        self.0
    }

    /// The address `bytes` further on.
    pub const fn offset(self, bytes: usize) -> DevicePtr {
        DevicePtr(self.0 + bytes as u64)
    }

    /// The kernel argument of a nullable pointer: the address, or 0 (NULL in the kernel).
    pub fn raw_or_null(ptr: Option<DevicePtr>) -> u64 {
        ptr.map_or(0, DevicePtr::raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_in_bytes_and_none_is_null() {
        let p = DevicePtr::from_raw(0x1000);
        assert_eq!(p.offset(256).raw(), 0x1100);
        assert_eq!(DevicePtr::raw_or_null(Some(p)), 0x1000);
        assert_eq!(DevicePtr::raw_or_null(None), 0);
    }
}
