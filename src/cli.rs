//! The command line in two stages: raw flags as clap parses them ([`Args`]),
//! then the validated [`Settings`] the rest of the crate reads.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{ArgGroup, CommandFactory, Parser, ValueEnum};

use crate::analysis::vocabulary::Vocabulary;
use crate::config::{self, Filter};
use crate::discover::Selection;
use crate::options::{Mode, Options};
use crate::plan::Strategy;

const AFTER_HELP: &str = "\
Examples:
  hookfence src/                          show the diff that would fence every offload hook
  hookfence --apply src/                  fence them, writing each file atomically
  hookfence --check .                     CI guard: exit 1 while any offload hook is unfenced
  hookfence --check --format github .     the same, as pull-request annotations
  hookfence --list src/                   audit: every hook site and why
  hookfence --strategy wrap --apply src/  route hooks through one audited no_compile helper
  git ls-files '*.py' | hookfence --files-from - --check
  hookfence - --stdin-filename pkg/hooks.py < pkg/hooks.py

Exit codes:
  0  success; with --check: every offload hook is fenced
  1  --check found offload hooks without a fence
  2  some file could not be read, decoded, parsed or written (every other file
     was still processed), or the command line or configuration was wrong";

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

/// What stdout carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Unified diff (`--check`: one line per unfenced hook; `--list`: the audit).
    Diff,
    /// One JSON document (schema in the README).
    Json,
    /// SARIF 2.1.0, for GitHub code scanning.
    Sarif,
    /// GitHub Actions workflow commands: annotations on the pull request.
    Github,
}

/// Find PyTorch offload hooks in Python code and fence them from
/// torch.compile with @torch.compiler.disable().
#[derive(Debug, Parser)]
#[command(
    name = "hookfence",
    version,
    after_help = AFTER_HELP,
    max_term_width = 100,
    group(ArgGroup::new("mode").args(["apply", "check", "list", "explain", "interactive", "replay"]))
)]
pub struct Args {
    /// Files or directories to scan (directories: *.py, honouring .gitignore);
    /// `-` reads one file on stdin and writes the result to stdout.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,

    /// Write the changes (each file atomically) instead of printing a diff.
    #[arg(long, help_heading = "Mode")]
    pub apply: bool,

    /// Write nothing; exit 1 if any offload hook is unfenced.
    #[arg(long, help_heading = "Mode")]
    pub check: bool,

    /// Print every hook site: `path:line:col  status  qualname  reason`.
    #[arg(long, help_heading = "Mode")]
    pub list: bool,

    /// Explain one hook site: how it was found, each step of its evidence,
    /// what was discounted, and the decision. TARGET is PATH:LINE (any line
    /// of the hook's definition) or a qualified name (`Cls.pre_forward`).
    #[arg(long, value_name = "TARGET", help_heading = "Mode")]
    pub explain: Option<String>,

    /// Ask about each planned fence on the terminal, then write the accepted ones.
    #[arg(long, help_heading = "Mode")]
    pub interactive: bool,

    /// With --interactive: save every answer to FILE, for --replay.
    #[arg(
        long,
        value_name = "FILE",
        requires = "interactive",
        // `requires` alone is met by any member of the `mode` group (clap #4707).
        conflicts_with_all = ["apply", "check", "list", "replay"],
        help_heading = "Mode"
    )]
    pub decisions: Option<PathBuf>,

    /// Apply the answers saved by --interactive --decisions, without asking.
    #[arg(long, value_name = "FILE", help_heading = "Mode")]
    pub replay: Option<PathBuf>,

    /// Write into files with uncommitted changes in a git work tree.
    #[arg(long, help_heading = "Mode")]
    pub allow_dirty: bool,

    /// Fence every hook, not only those that move, cast or sync module state.
    #[arg(long, help_heading = "Selection")]
    pub all_hooks: bool,

    /// Only walk files matching GLOB (gitignore-style; repeatable).
    #[arg(long, value_name = "GLOB", help_heading = "Selection")]
    pub include: Vec<String>,

    /// Skip walked files matching GLOB (gitignore-style; repeatable).
    #[arg(long, value_name = "GLOB", help_heading = "Selection")]
    pub exclude: Vec<String>,

    /// Read the paths to process from FILE, one per line (`-`: stdin).
    #[arg(long, value_name = "FILE", help_heading = "Selection")]
    pub files_from: Option<PathBuf>,

    /// The name of the file read from stdin, for messages and packages.
    #[arg(long, value_name = "PATH", help_heading = "Selection")]
    pub stdin_filename: Option<PathBuf>,

    /// Read the configuration from FILE (pyproject.toml or hookfence.toml).
    #[arg(
        long,
        value_name = "FILE",
        help_heading = "Selection",
        conflicts_with = "isolated"
    )]
    pub config: Option<PathBuf>,

    /// Read no configuration file.
    #[arg(long, help_heading = "Selection")]
    pub isolated: bool,

    /// The project the given paths belong to (default: the nearest
    /// directory above each with pyproject.toml, setup.py, setup.cfg or
    /// .git). Hooks are judged with the whole project in view; only the
    /// given paths are reported and rewritten.
    #[arg(long, value_name = "DIR", help_heading = "Selection")]
    pub project_root: Option<PathBuf>,

    /// How to fence: `decorate` inserts @torch.compiler.disable(); `wrap`
    /// inserts @no_compile from a helper module that also records each hook.
    #[arg(long, value_enum, default_value_t = StrategyArg::Decorate, value_name = "STRATEGY", help_heading = "Fence")]
    pub strategy: StrategyArg,

    /// The wrap strategy's helper module, as a dotted name (default:
    /// `_no_compile` at the root of each top-level package).
    #[arg(long, value_name = "DOTTED", help_heading = "Fence")]
    pub helper_module: Option<String>,

    /// Write a pytest module that imports every fenced hook and asserts torch
    /// treats it as disabled (written in every mode; PATH must be new, in an
    /// existing directory, or a file hookfence generated before).
    #[arg(long, value_name = "PATH", help_heading = "Fence")]
    pub emit_pytest: Option<PathBuf>,

    /// What stdout carries.
    #[arg(long, value_enum, default_value_t = Format::Diff, value_name = "FORMAT", help_heading = "Output")]
    pub format: Format,

    /// Print only the diff and errors: no notes, no summary.
    #[arg(short, long, help_heading = "Output")]
    pub quiet: bool,

    /// When to colour output.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, value_name = "WHEN", help_heading = "Output")]
    pub color: ColorChoice,

    /// Print a completion script for SHELL and exit.
    #[arg(long, value_enum, value_name = "SHELL", help_heading = "Output")]
    pub completions: Option<clap_complete::Shell>,

    /// Parse every file and query every tree whole, not only the files and
    /// places that can hold a hook (slower; the result is the same, except
    /// that syntax errors in files that cannot matter are reported too).
    #[arg(long, help_heading = "Performance")]
    pub no_prefilter: bool,

    /// Worker threads (default: one per core; at most 4 per core, and one per
    /// file plus one when only files are named).
    #[arg(short, long, value_name = "N", help_heading = "Performance")]
    pub jobs: Option<usize>,
}

/// How the planned fences are reviewed before they are written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Review {
    /// Ask on the terminal; optionally save the answers.
    Interactive { decisions: Option<PathBuf> },
    /// Apply saved answers.
    Replay(PathBuf),
}

/// Validated settings.
#[derive(Clone)]
pub struct Settings {
    pub paths: Vec<PathBuf>,
    /// `-`: the one file comes on stdin, named so.
    pub stdin_name: Option<PathBuf>,
    pub mode: Mode,
    pub review: Option<Review>,
    pub allow_dirty: bool,
    pub format: Format,
    pub quiet: bool,
    pub color_stdout: bool,
    pub color_stderr: bool,
    /// Worker threads (see [`pool_size`]).
    pub jobs: usize,
    pub options: Options,
    pub emit_pytest: Option<PathBuf>,
    /// The configuration file read, if any.
    pub config_path: Option<PathBuf>,
    /// `--explain TARGET`.
    pub explain: Option<String>,
}

impl Settings {
    /// Parses the process's arguments. Prints usage, help, version or a
    /// completion script and exits where clap would; exits 2 on a bad
    /// command line or configuration.
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
        if let Some(shell) = args.completions {
            clap_complete::generate(
                shell,
                &mut Args::command(),
                "hookfence",
                &mut std::io::stdout(),
            );
            std::process::exit(crate::exit::SUCCESS);
        }
        Settings::from_args(args).unwrap_or_else(|message| {
            eprintln!("hookfence: {message}");
            std::process::exit(crate::exit::ERROR);
        })
    }

    pub fn from_args(args: Args) -> Result<Settings, String> {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let color = |is_terminal: bool| match args.color {
            ColorChoice::Always => true,
            ColorChoice::Never => false,
            ColorChoice::Auto => is_terminal && !no_color,
        };
        let review = match (&args.replay, args.interactive) {
            (Some(file), _) => Some(Review::Replay(file.clone())),
            (None, true) => Some(Review::Interactive {
                decisions: args.decisions.clone(),
            }),
            (None, false) => None,
        };
        if matches!(review, Some(Review::Interactive { .. }))
            && !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal())
        {
            return Err("--interactive needs a terminal (stdin and stderr); use --replay FILE to apply saved decisions in scripts".to_owned());
        }
        let mode = if args.apply || review.is_some() {
            Mode::Apply
        } else if args.check {
            Mode::Check
        } else if args.list || args.explain.is_some() {
            Mode::List
        } else {
            Mode::Diff
        };

        if let Some(root) = &args.project_root {
            check_project_root(root)?;
        }
        let mut paths = args.paths.clone();
        // `--explain path.py:12` alone looks at that file (with its project).
        if paths.is_empty()
            && args.files_from.is_none()
            && let Some((file, line)) = args.explain.as_deref().and_then(|t| t.rsplit_once(':'))
            && line.parse::<usize>().is_ok()
        {
            paths.push(PathBuf::from(file));
        }
        if let Some(list) = &args.files_from {
            paths.extend(read_path_list(list)?);
        }
        let stdin_name = if paths.iter().any(|p| p.as_os_str() == "-") {
            if paths.len() != 1 {
                return Err("`-` (stdin) must be the only path".to_owned());
            }
            if review.is_some() {
                return Err("--interactive and --replay work on files, not stdin".to_owned());
            }
            Some(
                args.stdin_filename
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("-")),
            )
        } else {
            None
        };
        if paths.is_empty() && args.files_from.is_none() {
            paths.push(PathBuf::from("."));
        }
        if let Some(root) = &args.project_root {
            let named = match &stdin_name {
                Some(name) if name.as_os_str() != "-" => vec![name.clone()],
                Some(_) => Vec::new(),
                None => paths.clone(),
            };
            for path in &named {
                check_within_root(root, path)?;
            }
        }

        let start = stdin_name
            .as_deref()
            .or_else(|| paths.first().map(PathBuf::as_path))
            .unwrap_or(Path::new("."));
        let config = config::load(args.config.as_deref(), args.isolated, start)
            .map_err(|e| e.to_string())?;
        let cwd = PathBuf::from(".");
        let include = (!args.include.is_empty())
            .then(|| Filter::new(&args.include, cwd.clone()))
            .transpose()
            .map_err(|e| format!("--include: {e}"))?;
        let mut exclude = Vec::new();
        if !args.exclude.is_empty() {
            exclude.push(Filter::new(&args.exclude, cwd).map_err(|e| format!("--exclude: {e}"))?);
        }
        exclude.extend(config.exclude.clone());

        if let Some(dotted) = &args.helper_module {
            crate::wrap::validate_module_name(dotted)?;
        }
        let vocabulary = Vocabulary::new(&config.settings);
        // Debug builds can skip the check, so that a test can reach the
        // re-parse that guards every rewrite with a decorator that breaks it.
        let unchecked = cfg!(debug_assertions)
            && std::env::var_os("HOOKFENCE_TEST_UNCHECKED_DECORATOR").is_some();
        if config.settings.decorator.is_some() && !unchecked {
            check_decorator(&vocabulary).map_err(|message| {
                let file = config.path.as_deref().unwrap_or(Path::new("configuration"));
                format!("{}: decorator: {message}", file.display())
            })?;
        }
        let options = Options {
            all_hooks: args.all_hooks || config.settings.all_hooks.unwrap_or(false),
            prefilter: !args.no_prefilter,
            strategy: match args.strategy {
                StrategyArg::Decorate => Strategy::Decorate,
                StrategyArg::Wrap => Strategy::Wrap,
            },
            helper_module: args.helper_module.clone(),
            vocabulary: Arc::new(vocabulary),
            selection: Selection { include, exclude },
            progress: None,
            discovered: Arc::default(),
            project_root: args.project_root.clone(),
            context_classes: Arc::default(),
            module_cache: Arc::default(),
            reviewed: args.interactive || args.replay.is_some(),
            spelled_from_cwd: false,
        };
        let stderr_terminal = std::io::stderr().is_terminal();
        let mut options = options;
        if stderr_terminal && !args.quiet && std::env::var_os("CI").is_none() {
            // Hidden until the run has taken a second (see `advance`).
            let bar = indicatif::ProgressBar::with_draw_target(
                None,
                indicatif::ProgressDrawTarget::hidden(),
            );
            if let Ok(style) =
                indicatif::ProgressStyle::with_template("{spinner} {pos} files read {elapsed}")
            {
                bar.set_style(style);
            }
            options.progress = Some(bar);
        }
        let jobs = pool_size(
            args.jobs.filter(|&j| j > 0),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            known_work(&paths, stdin_name.is_some()),
        );
        Ok(Settings {
            paths,
            stdin_name,
            mode,
            review,
            allow_dirty: args.allow_dirty,
            format: args.format,
            quiet: args.quiet,
            color_stdout: color(std::io::stdout().is_terminal()),
            color_stderr: color(stderr_terminal),
            jobs,
            options,
            emit_pytest: args.emit_pytest,
            config_path: config.path,
            explain: args.explain,
        })
    }
}

/// The most worker threads `-j` gets per core: more cannot help (waiting
/// for a read is the only waiting a run does), and thousands of idle
/// threads cost a run on one file a minute.
pub const MAX_JOBS_PER_CORE: usize = 4;

/// The worker threads a run gets: `-j` (default: one per core), but no more
/// than [`MAX_JOBS_PER_CORE`] per core, nor more than one per file plus one
/// (on which the queries compile while the first file is read) when the
/// files are known in advance (`work`: no directory to walk).
pub fn pool_size(requested: Option<usize>, cores: usize, work: Option<usize>) -> usize {
    let cores = cores.max(1);
    requested
        .unwrap_or(cores)
        .min(cores.saturating_mul(MAX_JOBS_PER_CORE))
        .min(work.map_or(usize::MAX, |files| files.saturating_add(1)))
        .max(1)
}

/// How many files a run reads, when that is known before it starts: stdin
/// is one, paths that are all files are as many; a directory could hold
/// any number.
fn known_work(paths: &[PathBuf], stdin: bool) -> Option<usize> {
    if stdin {
        return Some(1);
    }
    paths.iter().all(|p| !p.is_dir()).then_some(paths.len())
}

/// The most bytes read from a `--files-from` list: some two million paths,
/// more than the largest monorepos hold, and `--files-from /dev/zero` stops
/// at once.
pub const MAX_PATH_LIST_BYTES: u64 = 256 * crate::source::MIB;

/// The paths in a `--files-from` list: one per line, blank lines skipped.
fn read_path_list(list: &Path) -> Result<Vec<PathBuf>, String> {
    const WHAT: &str = "a --files-from list";
    let bytes = if list.as_os_str() == "-" {
        crate::source::read_limited(std::io::stdin(), MAX_PATH_LIST_BYTES, WHAT)
            .map_err(|e| format!("--files-from -: cannot read stdin: {e}"))?
    } else {
        crate::source::read_file_limited(list, MAX_PATH_LIST_BYTES, WHAT)
            .map_err(|e| format!("--files-from {}: {e}", list.display()))?
    };
    let text = String::from_utf8(bytes).map_err(|_| {
        format!(
            "--files-from {}: stream did not contain valid UTF-8",
            list.display()
        )
    })?;
    Ok(text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.trim().is_empty())
        .map(PathBuf::from)
        .collect())
}

/// `--project-root` must name a directory that exists: a typo in a CI
/// configuration must not silently judge the hooks without their project.
fn check_project_root(root: &Path) -> Result<(), String> {
    match std::fs::metadata(root) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(format!(
            "--project-root {}: not a directory",
            root.display()
        )),
        Err(err) => Err(format!("--project-root {}: {err}", root.display())),
    }
}

/// Every path of a run with `--project-root` must lie inside that root:
/// reads are confined to the root, so a file outside it would be judged
/// without its imports (and `--check` would pass on what it cannot see).
/// Compared after resolving symlinks and `..`; a path that does not exist
/// yet (a `--stdin-filename`) is resolved through its nearest existing
/// parent.
fn check_within_root(root: &Path, path: &Path) -> Result<(), String> {
    let root_real = std::fs::canonicalize(root)
        .map_err(|err| format!("--project-root {}: {err}", root.display()))?;
    let real = crate::confine::resolved(path);
    if real.starts_with(&root_real) {
        Ok(())
    } else {
        Err(format!(
            "{}: not inside --project-root {}; name the project that holds it",
            path.display(),
            root.display()
        ))
    }
}

/// Checks the configured decorator the way the rewrite will use it: written
/// after `@` above a `def`, below the import of its first segment, it must
/// parse as exactly one decorator made of exactly that text, and the fence
/// recogniser must see a fence in it. Otherwise a second `--apply` would
/// not see the first one's fences and would fence again (or the rewrite
/// would not parse at all).
fn check_decorator(vocabulary: &Vocabulary) -> Result<(), String> {
    let decorator = vocabulary.decorator.as_str();
    let accepted =
        "(accepted: a dotted name with an optional call, e.g. \"torch.compiler.disable()\")";
    let root = decorator.split_once('.').map_or(decorator, |(r, _)| r);
    let import = format!("import {root}\n");
    let snippet = format!("{import}@{decorator}\ndef f():\n    pass\n");
    let at = import.len() + 1..import.len() + 1 + decorator.len();
    let tree = crate::parse::parse(&snippet).filter(|t| !t.root_node().has_error());
    let expression = tree.as_ref().and_then(|tree| {
        let root = tree.root_node();
        let definition = root
            .named_child(1)
            .filter(|_| root.named_child_count() == 2)?;
        let mut cursor = definition.walk();
        let decorators: Vec<_> = definition
            .named_children(&mut cursor)
            .filter(|n| n.kind() != "function_definition")
            .collect();
        match decorators[..] {
            [only] if only.kind() == "decorator" && only.named_child_count() == 1 => Some(only),
            _ => None,
        }
    });
    let Some(node) = expression.filter(|d| d.named_child(0).is_some_and(|e| e.byte_range() == at))
    else {
        return Err(format!(
            "{decorator:?} does not parse as one decorator expression {accepted}"
        ));
    };
    let recognised = crate::analysis::fences::decorator_callee(node, &snippet)
        .is_some_and(|callee| crate::analysis::fences::is_fence_path(&callee, vocabulary));
    if !recognised {
        return Err(format!(
            "hookfence would not recognise `@{decorator}` as a fence, so every --apply would add it again {accepted}"
        ));
    }
    Ok(())
}
