//! Layer 3: a generated pytest module that imports every fenced hook by its
//! dotted path and asserts torch really treats it as disabled, judged by the
//! marker dynamo reads; for the wrap strategy it also calls every helper's
//! `assert_all_disabled()`. Removing any one fence makes it fail.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::analysis::file_facts::{FenceState, FencedBy};
use crate::analysis::module_names;
use crate::analysis::verdict::Status;
use crate::analysis::vocabulary::WRAP_HELPER_FUNCTION;
use crate::error::FileError;
use crate::results::Analysis;
use crate::wrap::ModulePath;

/// A hook the guard checks: module and qualified name, and the project's
/// wrapper that fences it, when it is not torch's disable (or the wrap
/// helper, which calls it) that does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct GuardedHook {
    pub module: String,
    pub qualname: String,
    /// The dotted path of a project's fencing function (`pkg.hooks._compiler_disable`).
    pub wrapper: Option<String>,
}

/// What the guard checks for one analysis: the hooks, the import roots
/// `sys.path` needs, and the wrap helper modules whose registry it audits.
#[derive(Debug, Default)]
pub struct GuardPlan {
    pub hooks: Vec<GuardedHook>,
    pub roots: BTreeSet<PathBuf>,
    pub helpers: BTreeSet<String>,
}

/// The hooks that are (or, once applied, will be) fenced and can be imported
/// by dotted path: closures and lambdas cannot, and are left to the helper's
/// registry audit. Each is checked for the fence `--check` found on it, or
/// the one this run writes; a helper module is audited whether this run
/// creates it or finds hooks already fenced through it, so the guard
/// regenerated on a rewritten tree checks what the rewriting run's did.
pub fn guarded_hooks(analysis: &Analysis) -> GuardPlan {
    let mut plan = GuardPlan::default();
    for file in &analysis.files {
        let module = ModulePath::of(&file.path);
        let dotted = module.dotted();
        let package = module_names::package_of(&file.path, &dotted);
        let mut any = false;
        for site in &file.sites {
            let fence = match (&site.status, &site.candidate.fence) {
                (Status::Fenced(_), FenceState::Fenced { by, .. }) => by.clone(),
                (Status::Unfenced { .. }, _) => match &file.helper {
                    Some(helper) => FencedBy::Helper {
                        path: format!("{}.{WRAP_HELPER_FUNCTION}", helper.parts.join(".")),
                    },
                    None => FencedBy::Torch,
                },
                _ => continue,
            };
            let wrapper = match fence {
                FencedBy::Torch => None,
                FencedBy::Helper { path } => {
                    let path = module_names::absolute(&path, &package);
                    if let Some((helper, _)) = path.rsplit_once('.') {
                        plan.helpers.insert(helper.to_owned());
                        any = true;
                    }
                    None
                }
                FencedBy::Wrapper { path, local: true } => Some(format!("{dotted}.{path}")),
                FencedBy::Wrapper { path, local: false } => {
                    Some(module_names::absolute(&path, &package))
                }
            };
            let qualname = &site.candidate.qualname;
            let importable = qualname.split('.').all(|part| {
                !part.is_empty() && part.chars().all(|c| c == '_' || c.is_alphanumeric())
            });
            if importable {
                plan.hooks.push(GuardedHook {
                    module: dotted.clone(),
                    qualname: qualname.clone(),
                    wrapper,
                });
                any = true;
            }
        }
        if let Some(helper) = &file.helper {
            plan.helpers.insert(helper.parts.join("."));
            any = true;
        }
        if any {
            plan.roots.insert(module.import_root.clone());
        }
    }
    plan.hooks.sort();
    plan.hooks.dedup();
    plan
}

fn py_str(s: &str) -> String {
    // repr() of a str that holds no quotes or backslashes needs none escaped;
    // escape them anyway for paths.
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The text of the pytest module written to `out`. It holds a test only
/// for what there is to check (no test that can only skip).
pub fn pytest_module(analysis: &Analysis, out: &Path) -> String {
    let plan = guarded_hooks(analysis);
    let out_dir = std::path::absolute(out)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let root_lines: Vec<String> = plan
        .roots
        .iter()
        .map(|root| {
            let absolute = std::path::absolute(if root.as_os_str().is_empty() {
                Path::new(".")
            } else {
                root
            })
            .unwrap_or_else(|_| root.clone());
            let relative = pathdiff::diff_paths(&absolute, &out_dir).unwrap_or(absolute);
            let relative = relative.to_string_lossy().replace('\\', "/");
            format!(
                "    {},",
                py_str(if relative.is_empty() { "." } else { &relative })
            )
        })
        .collect();
    let hook_lines: Vec<String> = plan
        .hooks
        .iter()
        .map(|h| {
            let wrapper = h.wrapper.as_deref().map_or("None".to_owned(), py_str);
            format!(
                "    ({}, {}, {wrapper}),",
                py_str(&h.module),
                py_str(&h.qualname)
            )
        })
        .collect();
    let helper_lines: Vec<String> = plan
        .helpers
        .iter()
        .map(|h| format!("    {},", py_str(h)))
        .collect();
    let mut text = PYTEST_HEAD
        .replace("{roots}", &root_lines.join("\n"))
        .replace("{hooks}", &hook_lines.join("\n"))
        .replace("{helpers}", &helper_lines.join("\n"));
    if plan.hooks.iter().any(|h| h.wrapper.is_some()) {
        text.push_str(PYTEST_WRAPPER_CHECK);
    }
    if !plan.hooks.is_empty() {
        text.push_str(PYTEST_HOOK_TEST);
    }
    if !plan.helpers.is_empty() {
        text.push_str(PYTEST_HELPER_TEST);
    }
    if plan.hooks.is_empty() && plan.helpers.is_empty() {
        text.push_str(PYTEST_NOTHING);
    }
    text
}

/// Whether the guard for `analysis` checks anything.
pub fn checks_anything(analysis: &Analysis) -> bool {
    let plan = guarded_hooks(analysis);
    !(plan.hooks.is_empty() && plan.helpers.is_empty())
}

/// The first line of every test file hookfence generates.
const PYTEST_FIRST_LINE: &str = "\"\"\"Guard: every offload hook stays fenced from torch.compile.";
/// The line after it that says who wrote it.
const PYTEST_MARKER: &str = "Generated by hookfence --emit-pytest.";

/// Whether `bytes` are a test file hookfence generated (its header).
pub fn is_generated_pytest(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(512)];
    head.starts_with(PYTEST_FIRST_LINE.as_bytes())
        && memchr::memmem::find(head, PYTEST_MARKER.as_bytes()).is_some()
}

/// Where `--emit-pytest` writes, as checked before the run writes anything.
#[derive(Debug)]
pub enum Target {
    /// Nothing is there yet: the file is created (never replacing one that
    /// appears meanwhile).
    New(PathBuf),
    /// A test file hookfence generated before, holding these bytes: it is
    /// replaced only if it still holds them.
    Generated { path: PathBuf, bytes: Vec<u8> },
}

/// Checks that `out` may receive the test file: a path where nothing is,
/// in a directory that exists and can be written (no directory is created),
/// or a regular file that hookfence generated before (recognised by its
/// header) and that is none of the files this run reads or creates.
/// Anything else (a source, any other file, a directory, a symlink, a FIFO)
/// is refused, so that the test file never overwrites a source.
pub fn check_target(out: &Path, analysis: &Analysis) -> Result<Target, FileError> {
    let refuse = |what: &str| FileError::Write {
        path: out.to_path_buf(),
        source: std::io::Error::other(format!(
            "{what}; --emit-pytest writes only a new file or one it generated before"
        )),
    };
    let names_a_file =
        out.file_name().is_some() && !out.as_os_str().as_encoded_bytes().ends_with(b"/");
    if !names_a_file {
        return Err(refuse("it names no file"));
    }
    // Every spelling of the helper's path (`pkg/../pkg/h.py`, through a
    // symlinked directory) is the same file once its directories resolve.
    let resolved = crate::confine::resolved(out);
    if analysis
        .created
        .iter()
        .any(|c| crate::confine::resolved(&c.path) == resolved)
    {
        return Err(refuse("it is the helper module this run creates"));
    }
    let meta = match std::fs::symlink_metadata(out) {
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            crate::write::check_creatable(out)?;
            return Ok(Target::New(out.to_path_buf()));
        }
        Err(source) => {
            return Err(FileError::Write {
                path: out.to_path_buf(),
                source,
            });
        }
        Ok(meta) => meta,
    };
    if meta.file_type().is_symlink() {
        return Err(refuse("it is a symbolic link"));
    }
    if meta.is_dir() {
        return Err(refuse("it is a directory"));
    }
    if !meta.is_file() {
        return Err(refuse("it is not a regular file"));
    }
    let planned = analysis
        .files
        .iter()
        .map(|f| f.path.as_path())
        .chain(analysis.created.iter().map(|c| c.path.as_path()));
    let canonical = std::fs::canonicalize(out).ok();
    for path in planned {
        if canonical.is_some() && std::fs::canonicalize(path).ok() == canonical {
            return Err(refuse("it is a file this run scans"));
        }
    }
    let bytes = std::fs::read(out).map_err(|source| FileError::Write {
        path: out.to_path_buf(),
        source,
    })?;
    if !is_generated_pytest(&bytes) {
        return Err(refuse(
            "it exists and hookfence did not generate it (it lacks the --emit-pytest header)",
        ));
    }
    Ok(Target::Generated {
        path: out.to_path_buf(),
        bytes,
    })
}

/// Writes the test file to a checked target, atomically. A signal waits for
/// it to finish (see [`crate::interrupt::critical`]).
pub fn write_target(target: &Target, text: &str) -> Result<(), FileError> {
    crate::interrupt::critical(|| match target {
        Target::New(path) => crate::write::create_new(path, text.as_bytes()),
        Target::Generated { path, bytes } => {
            crate::write::write_atomic(path, bytes, text.as_bytes())
        }
    })
}

const PYTEST_HEAD: &str = r#""""Guard: every offload hook stays fenced from torch.compile.

Generated by hookfence --emit-pytest. Each hook below is imported by its dotted
path and must still be fenced the way ``hookfence --check`` sees it: by torch's
disable (the raw function carries ``_torchdynamo_disable``, the marker dynamo
reads), or by the project's own fencing function named beside it (the raw
function is what that function makes of a function, and what it makes reaches
torch's disable, at once or on its first call). Helper modules of the wrap
strategy audit their registry. Regenerate this file after adding hooks.
"""

import importlib
import inspect
import pathlib
import sys

import pytest

_HERE = pathlib.Path(__file__).resolve().parent
for _root in [
{roots}
]:
    _path = str((_HERE / _root).resolve())
    if _path not in sys.path:
        sys.path.insert(0, _path)

# (module, qualified name, the project's fencing function or None for torch's)
HOOKS = [
{hooks}
]

HELPERS = [
{helpers}
]


def _raw(module, qualname):
    owner = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    raw = inspect.getattr_static(owner, name)
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    elif isinstance(raw, property):
        raw = raw.fget
    return raw


def _marked(fn):
    return inspect.getattr_static(fn, "_torchdynamo_disable", False) is True
"#;

const PYTEST_WRAPPER_CHECK: &str = r#"

def _resolve(dotted):
    parts = dotted.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:]:
            owner = getattr(owner, part)
        return owner
    raise ImportError(f"cannot import {dotted}")


def _disables(value, probe):
    """Whether ``value`` is torch's disable of ``probe``."""
    if not _marked(value):
        return False
    inner = inspect.getattr_static(value, "_torchdynamo_orig_callable", None)
    return inner is probe or inspect.unwrap(value) is probe


def _reached(made, probe):
    """Whether ``made`` keeps torch's disable of ``probe`` (an attribute or a
    closure cell), as a lazy fence does once called."""
    values = list(getattr(made, "__dict__", {}).values())
    for cell in getattr(made, "__closure__", None) or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            pass
    return any(_disables(value, probe) for value in values)


def _fenced_by(fn, wrapper):
    """Whether ``fn`` is what ``wrapper`` makes of a function, and what it
    makes reaches torch's disable: at once (an eager wrapper marks it) or when
    first called (a lazy one)."""
    import torch
    import torch._dynamo

    def probe(*args, **kwargs):
        return None

    made = wrapper(probe)
    if _marked(made):
        return _marked(fn)
    if getattr(made, "__code__", None) is None or getattr(fn, "__code__", None) is not made.__code__:
        return False
    seen = []
    saved = torch.compiler.disable, torch._dynamo.disable

    def spy(real):
        def disable(target=None, *args, **kwargs):
            seen.append(target)
            return real(target, *args, **kwargs)

        return disable

    try:
        # Its own parameters, not the probe's: a hook-shaped wrapper
        # (`def wrapper(self, module, *args)`) takes arguments.
        parameters = inspect.signature(made, follow_wrapped=False).parameters.values()
        arguments = [
            None
            for p in parameters
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        arguments = []
    torch.compiler.disable, torch._dynamo.disable = (spy(f) for f in saved)
    try:
        made(*arguments)
    except Exception:
        pass  # what it reached before failing on made-up arguments still counts
    finally:
        torch.compiler.disable, torch._dynamo.disable = saved
    return any(t is probe or inspect.unwrap(t) is probe for t in seen if t is not None) or _reached(made, probe)
"#;

const PYTEST_HOOK_TEST: &str = r#"

@pytest.mark.parametrize(("module", "qualname", "wrapper"), HOOKS, ids=[f"{m}.{q}" for m, q, _ in HOOKS])
def test_hook_is_disabled_for_torch_compile(module, qualname, wrapper):
    fn = _raw(module, qualname)
    if wrapper is None:
        assert _marked(fn), f"{module}.{qualname} is not fenced: add @torch.compiler.disable() back"
    else:
        assert _fenced_by(fn, _resolve(wrapper)), (
            f"{module}.{qualname} is not fenced by {wrapper}: put its decorator back"
        )
"#;

const PYTEST_HELPER_TEST: &str = r#"

@pytest.mark.parametrize("helper", HELPERS)
def test_helper_registry_is_all_disabled(helper):
    for module, _, _ in HOOKS:
        importlib.import_module(module)
    importlib.import_module(helper).assert_all_disabled()
"#;

const PYTEST_NOTHING: &str = r#"

# hookfence found no fenced hook it can import by name and no helper module:
# there is nothing to check.
"#;
