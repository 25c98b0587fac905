//! The `tusk` driver (minimal: only the `dsa` subcommand in this branch).

use clap::{Parser, Subcommand};

/// tusk: allocation back end for tensor-accelerator compilers.
#[derive(Parser, Debug)]
#[command(name = "tusk", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Place the buffers of a MiniMalloc CSV and write their offsets.
    Dsa(tusk_shim::dsa::DsaArgs),
}

fn main() {
    let cli = Cli::parse();
    let code = match &cli.command {
        Command::Dsa(args) => tusk_shim::dsa::run(args),
    };
    std::process::exit(code);
}
