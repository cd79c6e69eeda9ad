//! sigsleep's entry point. `no_main` skips the Rust runtime's start-up
//! (stack-overflow handler, stdio checks): thousands of copies start and
//! sleep at once, and each skipped step is paid by every one of them.
//! The arguments are read from `main`'s own: with `no_main`, the standard
//! library learns them only where the C library hands them to its
//! initialisers, which glibc does and musl does not.
#![no_main]

use std::ffi::{CStr, OsString};
use std::os::unix::ffi::OsStringExt;

#[no_mangle]
extern "C" fn main(argc: std::ffi::c_int, argv: *const *const std::ffi::c_char) -> std::ffi::c_int {
    let args = (0..argc.max(0) as usize).map(|i| {
        // SAFETY: the C runtime hands `main` `argc` valid, NUL-terminated
        // strings in `argv`, which live as long as the process.
        OsString::from_vec(unsafe { CStr::from_ptr(*argv.add(i)) }.to_bytes().to_vec())
    });
    sigsleep::main_exit_code(args)
}
