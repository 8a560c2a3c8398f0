//! `gpu-runner`: will replay the golden corpus against live engines over real
//! ZeroMQ (the gateway side of the handshake). Not implemented yet; this binary
//! says so and exits with an error instead of pretending to run.

fn main() {
    eprintln!("gpu-runner: live-engine replay is not implemented yet (see the project's open issues)");
    std::process::exit(2);
}
