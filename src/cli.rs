//! The command line in two stages: raw flags as clap parses them, then the
//! validated [`Settings`] the rest of the crate reads.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, ValueEnum};

use crate::Mode;

const AFTER_HELP: &str = "\
Examples:
  hookfence src/                 show the diff that would fence every offload hook
  hookfence --apply src/         fence them, writing each file atomically
  hookfence --check .            CI guard: exit 1 while any offload hook is unfenced
  hookfence --all-hooks --check  also count hooks that do no offload work

Exit codes:
  0  nothing to fence (or the diff/apply run went fine)
  1  --check found offload hooks without a fence
  2  some file could not be read, decoded, parsed or written (the others were
     still processed), or the command line was wrong";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    Decorate,
    Wrap,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    Auto,
    Always,
    Never,
}

/// Find PyTorch offload hooks in Python code and fence them from
/// torch.compile with @torch.compiler.disable().
#[derive(Debug, Parser)]
#[command(name = "hookfence", version, after_help = AFTER_HELP, max_term_width = 100)]
pub struct Args {
    /// Files or directories to scan (directories: *.py, honouring .gitignore).
    #[arg(default_value = ".", value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Write the changes (each file atomically) instead of printing a diff.
    #[arg(long, help_heading = "Mode", conflicts_with = "check")]
    pub apply: bool,

    /// Write nothing; exit 1 if any offload hook is unfenced.
    #[arg(long, help_heading = "Mode")]
    pub check: bool,

    /// Fence every hook, not only those that move, cast or sync module state.
    #[arg(long, help_heading = "Selection")]
    pub all_hooks: bool,

    /// How to fence: `decorate` inserts @torch.compiler.disable(); `wrap`
    /// inserts @no_compile from a helper module that also records each hook.
    #[arg(long, value_enum, default_value_t = StrategyArg::Decorate, value_name = "STRATEGY", help_heading = "Fence")]
    pub strategy: StrategyArg,

    /// The wrap strategy's helper module, as a dotted name (default:
    /// `_no_compile` at the root of each top-level package).
    #[arg(
        long,
        value_name = "DOTTED",
        requires = "strategy",
        help_heading = "Fence"
    )]
    pub helper_module: Option<String>,

    /// Write a pytest module that imports every fenced hook and asserts torch
    /// treats it as disabled (written in every mode).
    #[arg(long, value_name = "PATH", help_heading = "Fence")]
    pub emit_pytest: Option<PathBuf>,

    /// Print only the diff and errors: no notes, no summary.
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,

    /// When to colour output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN", help_heading = "Output")]
    pub color: ColorChoice,

    /// Parse every file, not only those that can hold a hook (slower; the
    /// result is the same, except that syntax errors in files that cannot
    /// matter are reported too).
    #[arg(long, help_heading = "Performance")]
    pub no_prefilter: bool,

    /// Worker threads (default: one per core).
    #[arg(short, long, value_name = "N", help_heading = "Performance")]
    pub jobs: Option<usize>,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub paths: Vec<PathBuf>,
    pub mode: Mode,
    pub all_hooks: bool,
    pub quiet: bool,
    pub color_stdout: bool,
    pub color_stderr: bool,
    pub jobs: Option<usize>,
    pub prefilter: bool,
    pub strategy: crate::plan::Strategy,
    pub helper_module: Option<String>,
    pub emit_pytest: Option<PathBuf>,
}

impl Settings {
    /// Parses the process's arguments; prints usage and exits 2 on error.
    pub fn from_env() -> Settings {
        let args = Args::try_parse().unwrap_or_else(|err| {
            let code = if err.use_stderr() {
                crate::exit::ERROR
            } else {
                crate::exit::SUCCESS
            };
            let _ = err.print();
            std::process::exit(code);
        });
        Settings::from_args(args)
    }

    pub fn from_args(args: Args) -> Settings {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = |is_terminal: bool| match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color,
        };
        let mode = if args.apply {
            Mode::Apply
        } else if args.check {
            Mode::Check
        } else {
            Mode::Diff
        };
        Settings {
            paths: args.paths,
            mode,
            all_hooks: args.all_hooks,
            quiet: args.quiet,
            color_stdout: color(std::io::stdout().is_terminal()),
            color_stderr: color(std::io::stderr().is_terminal()),
            jobs: args.jobs.filter(|&j| j > 0),
            prefilter: !args.no_prefilter,
            strategy: match args.strategy {
                StrategyArg::Decorate => crate::plan::Strategy::Decorate,
                StrategyArg::Wrap => crate::plan::Strategy::Wrap,
            },
            helper_module: args.helper_module,
            emit_pytest: args.emit_pytest,
        }
    }
}
