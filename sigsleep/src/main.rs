//! sigsleep's entry point. `no_main` skips the Rust runtime's start-up
//! (stack-overflow handler, stdio checks): thousands of copies start and
//! sleep at once, and each skipped step is paid by every one of them.
#![no_main]

#[no_mangle]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    sigsleep::main_exit_code()
}
