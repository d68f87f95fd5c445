fn main() {
    println!("cargo::rerun-if-changed=src/coverage.c");
    cc::Build::new().file("src/coverage.c").opt_level(2).compile("bolide_fuzz_coverage");
}
