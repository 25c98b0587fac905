//! The `tusk` driver.
fn main() {
    eprintln!("tusk: driver not built yet");
    std::process::exit(2);
}
