//! What the signature table (super) is made of: the kinds a kernel parameter can have, the
//! table's row for a kernel or a family of kernels, and the macro that turns each row into a
//! parameter struct with named fields and the method that packs them.

use std::any::TypeId;

use super::args::Args;

/// How a kernel parameter is passed, and the Rust type of its field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::launchers) enum ParamKind {
    /// A device address (`T*`): [`DevicePtr`](crate::device_ptr::DevicePtr).
    Ptr,
    /// A device address the kernel checks for NULL: `Option<DevicePtr>`, `None` passed as 0.
    NullablePtr,
    /// A size or count: `usize` on the host, `int` in the kernel, converted with a check.
    Count,
    /// An `int` that is no size (a flag): `i32`.
    I32,
    /// A `float`: `f32`.
    F32,
    /// A 64-bit integer (`u64`): `u64`.
    U64,
}

/// The kernels one row of the table declares.
#[derive(Debug, Clone, Copy)]
pub(in crate::launchers) enum Names {
    /// One kernel.
    One(&'static str),
    /// Kernels with this one signature, each written out in the `.cu`.
    Several(&'static [&'static str]),
    /// A macro's instantiations: its name with the macro's parameters as `{PARAM}` (e.g.
    /// `gemv_bf16_{NT}_s{SPLIT}`), and the list of instantiations the launchers pick from
    /// (launchers/names.rs).
    Family {
        pattern: &'static str,
        names: fn() -> Vec<&'static str>,
    },
}

impl Names {
    pub(in crate::launchers) fn list(&self) -> Vec<&'static str> {
        match *self {
            Names::One(name) => vec![name],
            Names::Several(names) => names.to_vec(),
            Names::Family { names, .. } => names(),
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub(in crate::launchers) struct Signature {
    /// The parameter struct, for messages.
    pub(in crate::launchers) rust_name: &'static str,
    pub(in crate::launchers) names: Names,
    /// In the order of the `.cu` declaration; the launches read them from the parameter
    /// struct, the test against the `.cu` sources from here.
    #[cfg(test)]
    pub(in crate::launchers) params: &'static [(&'static str, ParamKind)],
    /// The parameter struct's type: a launch checks that the kernel it names belongs to the
    /// row of the struct it was given.
    pub(in crate::launchers) struct_type: fn() -> TypeId,
}

impl Signature {
    /// The row, for messages: its struct, and its pattern if it is a family's.
    pub(in crate::launchers) fn describe(&self) -> String {
        match self.names {
            Names::Family { pattern, .. } => format!("{} ({pattern})", self.rust_name),
            Names::One(_) | Names::Several(_) => self.rust_name.to_string(),
        }
    }
}

/// A kernel's arguments with named fields: which kernel they launch and their packing.
pub(in crate::launchers) trait KernelParams: 'static {
    fn kernel(&self) -> &'static str;
    fn args(&self) -> anyhow::Result<Args>;
}

/// The signature table: for each row, a doc comment, the struct's name, the kernels (one
/// `kernel("name")`; several of one signature, `kernels(CONST = "name", ..)`, each name
/// becoming an associated const; a macro's instantiations, `family("pattern", list)`, `list` a
/// `fn() -> Vec<&'static str>`), then the parameters `name: ParamKind` in the `.cu` order.
/// A struct of several kernels has a first field `kernel` saying which it launches. Also
/// generates `SIGNATURES`, every row, for the load-time name check and the test against the
/// `.cu` sources.
macro_rules! kernel_signatures {
    ($(
        $(#[doc = $doc:literal])*
        $ty:ident = $how:ident $names:tt { $($param:ident: $kind:ident),* $(,)? }
    )*) => {
        $(
            kernel_signatures!(
                @struct [$(#[doc = $doc])*] $ty $how $names { $($param: $kind),* }
            );
        )*
        pub(in crate::launchers) const SIGNATURES: &[Signature] =
            &[$(kernel_signatures!(@signature $ty $how $names)),*];
    };

    (@struct [$($doc:tt)*] $ty:ident kernel ($name:literal) { $($param:ident: $kind:ident),* }) => {
        $($doc)*
        #[derive(Debug, Clone, Copy)]
        pub(in crate::launchers) struct $ty {
            $(pub(in crate::launchers) $param: kernel_signatures!(@type $kind),)*
        }
        impl $ty {
            pub(in crate::launchers) const NAME: &'static str = $name;
        }
        kernel_signatures!(@impl $ty [Self::NAME] { $($param: $kind),* });
    };

    (@struct [$($doc:tt)*] $ty:ident kernels ($($id:ident = $name:literal),* $(,)?)
        { $($param:ident: $kind:ident),* }) => {
        $($doc)*
        #[derive(Debug, Clone, Copy)]
        pub(in crate::launchers) struct $ty {
            /// Which of the kernels this launches: one of the associated consts.
            pub(in crate::launchers) kernel: &'static str,
            $(pub(in crate::launchers) $param: kernel_signatures!(@type $kind),)*
        }
        impl $ty {
            $(pub(in crate::launchers) const $id: &'static str = $name;)*
        }
        kernel_signatures!(@impl $ty [kernel] { $($param: $kind),* });
    };

    (@struct [$($doc:tt)*] $ty:ident family ($pattern:literal, $list:path)
        { $($param:ident: $kind:ident),* }) => {
        $($doc)*
        #[derive(Debug, Clone, Copy)]
        pub(in crate::launchers) struct $ty {
            /// Which instantiation this launches: one of the family's list.
            pub(in crate::launchers) kernel: &'static str,
            $(pub(in crate::launchers) $param: kernel_signatures!(@type $kind),)*
        }
        kernel_signatures!(@impl $ty [kernel] { $($param: $kind),* });
    };

    (@impl $ty:ident [$($kernel:tt)*] { $($param:ident: $kind:ident),* }) => {
        impl $ty {
            /// The parameters in the `.cu` order.
            pub(in crate::launchers) const PARAMS: &'static [(&'static str, ParamKind)] =
                &[$((stringify!($param), ParamKind::$kind)),*];
        }
        const _: () = assert!($ty::PARAMS.len() <= MAX_PARAMS);
        impl KernelParams for $ty {
            fn kernel(&self) -> &'static str {
                kernel_signatures!(@kernel self $($kernel)*)
            }
            fn args(&self) -> anyhow::Result<Args> {
                let mut args = Args::new();
                $(kernel_signatures!(@push args self.$param, $param, $kind);)*
                Ok(args)
            }
        }
    };

    (@kernel $self:ident Self::NAME) => { Self::NAME };
    (@kernel $self:ident kernel) => { $self.kernel };

    (@type Ptr) => { DevicePtr };
    (@type NullablePtr) => { Option<DevicePtr> };
    (@type Count) => { usize };
    (@type I32) => { i32 };
    (@type F32) => { f32 };
    (@type U64) => { u64 };

    (@push $args:ident $value:expr, $param:ident, Ptr) => { $args.ptr($value) };
    (@push $args:ident $value:expr, $param:ident, NullablePtr) => { $args.nullable_ptr($value) };
    (@push $args:ident $value:expr, $param:ident, Count) => {
        $args.count($value, stringify!($param))?
    };
    (@push $args:ident $value:expr, $param:ident, I32) => { $args.i32($value) };
    (@push $args:ident $value:expr, $param:ident, F32) => { $args.f32($value) };
    (@push $args:ident $value:expr, $param:ident, U64) => { $args.u64($value) };

    (@signature $ty:ident kernel ($name:literal)) => {
        Signature {
            rust_name: stringify!($ty),
            names: Names::One($name),
            #[cfg(test)]
            params: $ty::PARAMS,
            struct_type: TypeId::of::<$ty>,
        }
    };
    (@signature $ty:ident kernels ($($id:ident = $name:literal),* $(,)?)) => {
        Signature {
            rust_name: stringify!($ty),
            names: Names::Several(&[$($name),*]),
            #[cfg(test)]
            params: $ty::PARAMS,
            struct_type: TypeId::of::<$ty>,
        }
    };
    (@signature $ty:ident family ($pattern:literal, $list:path)) => {
        Signature {
            rust_name: stringify!($ty),
            names: Names::Family { pattern: $pattern, names: $list },
            #[cfg(test)]
            params: $ty::PARAMS,
            struct_type: TypeId::of::<$ty>,
        }
    };
}
pub(super) use kernel_signatures;
