//! Link arguments for the probe's binary. Without std nothing asks for the C library, yet the C
//! start-up files (`crt1.o`) that call the probe's `main` need it.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-bins=-lc");
}
