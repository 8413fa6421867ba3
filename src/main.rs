use std::process::ExitCode;

fn main() -> ExitCode {
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
