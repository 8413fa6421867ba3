use std::process::ExitCode;

fn main() -> ExitCode {
    // Rendering, review and writing run on this thread after the workers'
    // analysis: it gets the workers' stack (see `parse::MAX_TREE_DEPTH`).
    let main = std::thread::Builder::new()
        .name("hookfence".to_owned())
        .stack_size(hookfence::parse::WORKER_STACK_BYTES)
        .spawn(run);
    match main.map(std::thread::JoinHandle::join) {
        Ok(Ok(code)) => code,
        // A panic has printed its message already.
        Ok(Err(_)) => ExitCode::from(hookfence::exit::ERROR as u8),
        Err(err) => {
            eprintln!("hookfence: cannot start: {err}");
            ExitCode::from(hookfence::exit::ERROR as u8)
        }
    }
}

fn run() -> ExitCode {
    let settings = hookfence::cli::Settings::from_env();
    let code = match hookfence::run(
        &settings,
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
    ) {
        Ok(code) => code,
        // A closed pipe (`hookfence | head`) is not a failure.
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => hookfence::exit::SUCCESS,
        Err(err) => {
            eprintln!("hookfence: {err}");
            hookfence::exit::ERROR
        }
    };
    ExitCode::from(code as u8)
}
