//! The kinds of filter (SPEC.md §4), one folder each: its public type and its own methods, its
//! builder options, what it does inside one slot group (the core's seam), its Lua, its near
//! cache's copy and its snapshot sections.

/// The registry: every kind's folder, its kind type (`redbloom::kind::…`), its public
/// filter type (`redbloom::…`) and any other public type of its own, such as its info
/// (`redbloom::…` too). A new kind is one line here.
macro_rules! kinds {
    ($($module:ident: $kind:ident, $filter:ident $(, $own:ident)*;)+) => {
        $(pub(crate) mod $module;)+

        /// Every kind's type, re-exported as `redbloom::kind`.
        pub(crate) mod types {
            $(pub use super::$module::$kind;)+
        }

        /// Every kind's filter type (and its own other types), re-exported at the crate's root.
        pub(crate) mod filters {
            $(pub use super::$module::{$filter $(, $own)*};)+
        }
    };
}

kinds! {
    plain: Plain, RedisBloom;
    counting: Counting, CountingBloom;
    window: Window, WindowBloom;
    growing: Growing, GrowingBloom;
    module: Module, ModuleBloom, ModuleInfo, ModuleParams, MODULE_KEY_TYPES;
}
