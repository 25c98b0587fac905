//! The `tusk` driver (minimal: only `color` in this branch).
use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "tusk",
    about = "allocation back end for tensor-accelerator compilers"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Color a DIMACS graph with the register colorer's core.
    Color(tusk_shim::color::ColorArgs),
}

fn main() {
    let code = match Cli::try_parse() {
        Ok(cli) => match cli.cmd {
            Cmd::Color(a) => tusk_shim::color::run(&a),
        },
        Err(e) => {
            let _ = e.print();
            if e.use_stderr() {
                2
            } else {
                0
            }
        }
    };
    std::process::exit(code);
}
