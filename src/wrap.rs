//! The wrap strategy: every offload hook is decorated with `@no_compile`
//! from one helper module per top-level package, which fences it with
//! `torch.compiler.disable` and records it in a registry that
//! `assert_all_disabled()` audits.

use std::path::{Path, PathBuf};

use crate::analysis::vocabulary::WRAP_HELPER_FUNCTION;

/// The default helper module name, created at the root of the top-level
/// package that holds the hooks.
pub const DEFAULT_HELPER: &str = "_no_compile";

/// Where a Python file sits in its package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModulePath {
    /// The directory `sys.path` needs for the top-level package (or the
    /// file's own directory for a module outside any package).
    pub import_root: PathBuf,
    /// Dotted parts: `["accelerate", "utils", "modeling"]`.
    pub parts: Vec<String>,
}

impl ModulePath {
    /// Works out the module a file is, from the `__init__.py` files above it.
    pub fn of(file: &Path) -> ModulePath {
        let stem = file
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut parts = Vec::new();
        if stem != "__init__" {
            parts.push(stem);
        }
        let mut dir = file.parent().map(Path::to_path_buf).unwrap_or_default();
        loop {
            let init = if dir.as_os_str().is_empty() {
                PathBuf::from("__init__.py")
            } else {
                dir.join("__init__.py")
            };
            if !init.is_file() {
                break;
            }
            let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                // A package the path does not name (`hooks.py` run from
                // inside it, `../pkg/hooks.py`): name it from the absolute
                // path.
                if dir.is_absolute() && dir.parent().is_none() {
                    break;
                }
                return ModulePath::of(&crate::analysis::module_names::lexical_absolute(file));
            };
            parts.push(name);
            dir = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        }
        parts.reverse();
        ModulePath {
            import_root: dir,
            parts,
        }
    }

    pub fn dotted(&self) -> String {
        self.parts.join(".")
    }

    /// The package a module belongs to (itself for an `__init__.py`).
    fn package(&self, is_init: bool) -> &[String] {
        if is_init {
            &self.parts
        } else {
            &self.parts[..self.parts.len().saturating_sub(1)]
        }
    }
}

/// The helper module a file's hooks use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Helper {
    /// Where the helper file is (or will be).
    pub path: PathBuf,
    /// Its dotted module name.
    pub parts: Vec<String>,
    /// Whether a helper hookfence generated is already there (else the run
    /// creates it).
    pub exists: bool,
}

/// Python's keywords: none can be a module name in an import statement.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Checks a `--helper-module` value: ASCII Python identifiers joined by
/// dots, none a keyword, none `__init__` (which names the package itself).
/// Non-ASCII names are refused too: CPython looks an imported name up in its
/// NFKC form, which the file name on disk need not be.
pub fn validate_module_name(dotted: &str) -> Result<(), String> {
    not_a_module_name(dotted).map_or(Ok(()), |why| {
        Err(format!(
            "--helper-module {dotted:?} is not a dotted Python module name: {why} (accepted: ASCII identifiers joined by dots, e.g. \"pkg._no_compile\")"
        ))
    })
}

/// Why `dotted` is not a module name [`validate_module_name`] accepts.
fn not_a_module_name(dotted: &str) -> Option<String> {
    if dotted.is_empty() {
        return Some("it is empty".to_owned());
    }
    for part in dotted.split('.') {
        let mut chars = part.chars();
        let identifier = chars
            .next()
            .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if part.is_empty() {
            return Some("it has an empty part".to_owned());
        }
        if !identifier {
            return Some(format!(
                "{part:?} is not an identifier (letters, digits and _, not starting with a digit)"
            ));
        }
        if KEYWORDS.contains(&part) {
            return Some(format!("{part:?} is a Python keyword"));
        }
        if part == "__init__" {
            return Some("\"__init__\" names the package itself, not a module in it".to_owned());
        }
    }
    None
}

/// The marker every helper hookfence generates carries in its docstring.
const HELPER_MARKER: &str = "Generated by hookfence (--strategy wrap).";

/// Whether `bytes` are a helper module hookfence generated: the marker near
/// the top, and the helper function defined at module level.
pub fn is_generated_helper(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(1024)];
    let marked = memchr::memmem::find(head, HELPER_MARKER.as_bytes()).is_some();
    let defines =
        memchr::memmem::find(bytes, format!("\ndef {WRAP_HELPER_FUNCTION}(").as_bytes()).is_some();
    marked && defines
}

impl Helper {
    /// The helper for `file`: `--helper-module` when given (a dotted path
    /// whose first part must be the file's top-level package, or a top-level
    /// module), else `_no_compile` at the root of the file's top-level
    /// package. The helper must be importable by exactly the name the file
    /// will import, so this refuses (naming the file and the reason):
    /// - a file outside any regular package, unless it is a top-level
    ///   module for sure: it uses no relative import (which only a package
    ///   member can), its directory is not inside a regular package (then
    ///   it is a namespace portion of that package), and it is the current
    ///   directory or holds a regular package (so it is where `sys.path`
    ///   points). Otherwise its directory may be a namespace package or a
    ///   directory of scripts, and the import that works for one fails for
    ///   the other;
    /// - a helper whose dotted name is no Python module name (a package
    ///   directory such as `my-pkg`);
    /// - a helper that would be the file itself (a circular import);
    /// - a module already at the helper's path that hookfence did not
    ///   generate (it need not define `no_compile`), or anything else there
    ///   (a directory, a dangling symlink, a FIFO);
    /// - a package or an extension module of the helper's name beside it,
    ///   which Python would import instead;
    /// - a helper below a directory that is not a regular package;
    /// - a helper to create in a directory this process cannot write.
    pub fn for_file(
        file: &Path,
        chosen: Option<&str>,
        relative_imports: bool,
    ) -> Result<Helper, String> {
        let module = ModulePath::of(file);
        let is_init = file.file_stem().is_some_and(|s| s == "__init__");
        let in_package = is_init || module.parts.len() > 1;
        let top_level = !relative_imports
            && !inside_a_package(&module.import_root)
            && (in_current_dir(file) || holds_a_package(&module.import_root));
        if !in_package && !top_level {
            return Err(format!(
                "{}: not inside a regular package (its directory has no __init__.py){}, so the name it is imported by is unknown: a namespace package member needs `from <package> import`, a script `from _no_compile import`; add an __init__.py, or use --strategy decorate",
                file.display(),
                if relative_imports {
                    " yet it uses relative imports"
                } else {
                    ""
                }
            ));
        }
        let parts: Vec<String> = match chosen {
            Some(dotted) => {
                validate_module_name(dotted)?;
                dotted.split('.').map(str::to_owned).collect()
            }
            None => {
                let mut parts: Vec<String> = if in_package {
                    vec![module.parts[0].clone()]
                } else {
                    Vec::new()
                };
                parts.push(DEFAULT_HELPER.to_owned());
                parts
            }
        };
        let in_same_package = in_package && parts.len() > 1 && parts[0] == module.parts[0];
        if parts.len() > 1 && !in_same_package {
            return Err(format!(
                "{}: helper module {} is not inside this file's top-level package {}",
                file.display(),
                parts.join("."),
                module
                    .parts
                    .first()
                    .filter(|_| in_package)
                    .map_or("(none)", String::as_str)
            ));
        }
        if let Some(why) = not_a_module_name(&parts.join(".")) {
            return Err(format!(
                "{}: the helper's name {} is not a Python module name ({why}); rename the package directory, or use --strategy decorate",
                file.display(),
                parts.join(".")
            ));
        }
        let mut path = module.import_root.clone();
        for part in &parts {
            path.push(part);
        }
        path.set_extension("py");
        let mut helper = Helper {
            path,
            parts,
            exists: false,
        };
        helper.exists = helper.check(file, &module.import_root).map_err(|why| {
            format!(
                "{}: cannot use {} ({}) as the helper module: {why}",
                file.display(),
                helper.parts.join("."),
                helper.path.display()
            )
        })?;
        Ok(helper)
    }

    /// Checks that the helper can be imported by its dotted name from
    /// `root`; returns whether a generated helper is already there.
    fn check(&self, file: &Path, root: &Path) -> Result<bool, String> {
        if same_file(file, &self.path) {
            return Err("it is this file itself (the import would be circular)".to_owned());
        }
        let mut dir = root.to_path_buf();
        for part in &self.parts[..self.parts.len() - 1] {
            dir.push(part);
            if !dir.join("__init__.py").is_file() {
                return Err(format!(
                    "{} is not a regular package (no __init__.py); hookfence creates the helper module, never packages",
                    dir.display()
                ));
            }
        }
        let name = &self.parts[self.parts.len() - 1];
        let shadow = dir.join(name);
        if std::fs::symlink_metadata(&shadow).is_ok() {
            return Err(format!(
                "{} exists, and Python would import it (or be confused by it) instead",
                shadow.display()
            ));
        }
        let listing = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir.as_path()
        };
        if let Ok(entries) = std::fs::read_dir(listing) {
            for entry in entries.flatten() {
                let entry = entry.file_name();
                let entry = entry.to_string_lossy();
                let extension = entry.strip_prefix(name.as_str()).is_some_and(|rest| {
                    rest.starts_with('.') && (rest.ends_with(".so") || rest.ends_with(".pyd"))
                });
                if extension {
                    return Err(format!(
                        "the extension module {} has the same name, and Python imports it first",
                        dir.join(&*entry).display()
                    ));
                }
            }
        }
        match std::fs::symlink_metadata(&self.path) {
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                crate::write::check_creatable(&self.path).map_err(|e| e.to_string())?;
                Ok(false)
            }
            Err(err) => Err(format!("cannot look at it: {err}")),
            Ok(_) => {
                let meta = std::fs::metadata(&self.path).map_err(|err| {
                    format!("it is a symbolic link to nothing that can be read ({err})")
                })?;
                if !meta.is_file() {
                    return Err("it is not a regular file".to_owned());
                }
                let bytes =
                    std::fs::read(&self.path).map_err(|err| format!("cannot read it: {err}"))?;
                if !is_generated_helper(&bytes) {
                    return Err(format!(
                        "it exists and hookfence did not generate it, so it need not define {WRAP_HELPER_FUNCTION}; rename it, or choose another place with --helper-module"
                    ));
                }
                Ok(true)
            }
        }
    }

    /// The import line a file uses for `no_compile`: relative when the file
    /// already imports its siblings relatively, absolute otherwise.
    pub fn import_line(&self, file: &Path, relative: bool) -> String {
        let module = ModulePath::of(file);
        let is_init = file.file_stem().is_some_and(|s| s == "__init__");
        let package = module.package(is_init);
        let from = if relative && self.parts.len() > 1 && !package.is_empty() {
            let common = package
                .iter()
                .zip(&self.parts)
                .take_while(|(a, b)| a == b)
                .count();
            let dots = ".".repeat(package.len() - common + 1);
            format!("{dots}{}", self.parts[common..].join("."))
        } else {
            self.parts.join(".")
        };
        format!("from {from} import {WRAP_HELPER_FUNCTION}")
    }
}

/// Whether `file` is in the current directory.
fn in_current_dir(file: &Path) -> bool {
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => return true,
    };
    let (Ok(dir), Ok(cwd)) = (std::fs::canonicalize(dir), std::env::current_dir()) else {
        return false;
    };
    std::fs::canonicalize(cwd).is_ok_and(|cwd| cwd == dir)
}

/// Whether `dir` holds a regular package (a directory with `__init__.py`):
/// then it is an import root, as `site-packages` or a `src/` layout is.
fn holds_a_package(dir: &Path) -> bool {
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    std::fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .flatten()
            .any(|e| e.path().join("__init__.py").is_file())
    })
}

/// Whether `dir`'s parent is a regular package.
fn inside_a_package(dir: &Path) -> bool {
    let dir = std::path::absolute(if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    });
    dir.ok()
        .and_then(|d| d.parent().map(|p| p.join("__init__.py")))
        .is_some_and(|init| init.is_file())
}

/// Whether two paths name one file (by what they resolve to where both
/// exist, else as written).
fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => std::path::absolute(a).ok() == std::path::absolute(b).ok(),
    }
}

/// The text of a new helper module, in the line ending of the files that use it.
pub fn helper_source(line_ending: &str) -> String {
    HELPER_TEMPLATE.replace('\n', line_ending)
}

const HELPER_TEMPLATE: &str = r#""""Fence hooks from torch.compile, and keep a registry of them.

Generated by hookfence (--strategy wrap). Every offload hook of this package is
decorated with ``@no_compile``: dynamo never traces it, and it is recorded, so
that ``assert_all_disabled()`` can audit that none escaped.

The fence costs nothing at import: unlike ``torch.compiler.disable``, it does
not import ``torch._dynamo``. The hook is wrapped in a function that carries
the marker dynamo reads (``_torchdynamo_disable``), so that dynamo treats a
call to it as a call to a disabled function, and that runs the hook through
``torch.compiler.disable`` once dynamo is loaded (before that, nothing can be
compiling). Dynamo is told to skip the wrapper's own frame as soon as it is
imported, so the wrapper costs no graph break of its own.
"""

import functools
import importlib
import importlib.abc
import importlib.util
import inspect
import sys

import torch

__all__ = ["no_compile", "registered_hooks", "assert_all_disabled"]

_registry = []


def no_compile(fn):
    """Return ``fn`` fenced from torch.compile, and record it."""
    fenced = _fence(fn)
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", repr(fn))
    _registry.append((module, qualname, fenced))
    return fenced


def _fence(fn):
    disabled = None

    @functools.wraps(fn)
    def fenced(*args, **kwargs):
        nonlocal disabled
        if disabled is None:
            if not _dynamo_loaded():
                return fn(*args, **kwargs)
            _skip_wrapper_frame()
            disabled = torch.compiler.disable(fn)
        return disabled(*args, **kwargs)

    fenced._torchdynamo_disable = True
    return fenced


# Every fence's wrapper runs this one code object.
_WRAPPER_CODE = _fence(len).__code__
_skipped = []


def _dynamo_loaded():
    """Whether ``torch._dynamo`` is imported, and done importing: while
    another thread is still importing it, nothing can be compiling, and
    calling into it would import it a second time, half-initialised."""
    module = sys.modules.get("torch._dynamo")
    spec = getattr(module, "__spec__", None)
    return module is not None and not getattr(spec, "_initializing", False)


def _skip_wrapper_frame():
    """Tell dynamo never to trace the wrapper's frame itself (the hook inside
    runs through torch.compiler.disable); without it, each wrapper would cost
    one more graph break the first time it runs under torch.compile."""
    if _skipped:
        return
    try:
        from torch._dynamo.eval_frame import skip_code

        skip_code(_WRAPPER_CODE)
    except Exception:  # a torch without it: the fence holds, at one more break
        return
    _skipped.append(True)


class _WhenDynamoLoads(importlib.abc.MetaPathFinder):
    """Runs ``_skip_wrapper_frame`` right after ``torch._dynamo`` is imported
    (``torch.compile`` imports it), before dynamo sees any frame; then leaves
    ``sys.meta_path``. A look-up that imports nothing
    (``importlib.util.find_spec``) leaves it in place."""

    _looking = False

    def find_spec(self, name, path=None, target=None):
        if name != "torch._dynamo" or self._looking:
            return None
        self._looking = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._looking = False
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        load = loader.exec_module
        finder = self

        def exec_module(module):
            try:
                sys.meta_path.remove(finder)
            except ValueError:
                pass
            load(module)
            _skip_wrapper_frame()

        spec.loader = _Loader(loader, exec_module)
        return spec


class _Loader(importlib.abc.Loader):
    """``loader`` with its ``exec_module`` replaced (the original loader,
    which other look-ups may share, is left as it is)."""

    def __init__(self, loader, exec_module):
        self._loader = loader
        self.exec_module = exec_module

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def __getattr__(self, name):
        return getattr(self._loader, name)


if "torch._dynamo" in sys.modules:
    _skip_wrapper_frame()
else:
    sys.meta_path.insert(0, _WhenDynamoLoads())


def registered_hooks():
    """The hooks recorded so far, as ``(qualified name, object)`` pairs."""
    return [(_name(module, qualname), fenced) for module, qualname, fenced in _registry]


def assert_all_disabled():
    """Raise ``AssertionError`` naming every recorded hook that torch will not
    treat as disabled, judged by the marker dynamo itself reads on the function
    now bound where the hook was defined."""
    escaped = [
        _name(module, qualname)
        for module, qualname, fenced in _registry
        if not _is_disabled(_current(module, qualname, fenced))
    ]
    if escaped:
        raise AssertionError("not disabled for torch.compile: " + ", ".join(escaped))


def _name(module, qualname):
    return f"{module}.{qualname}" if module else qualname


def _is_disabled(fn):
    return inspect.getattr_static(fn, "_torchdynamo_disable", False) is True


def _current(module, qualname, fenced):
    """The raw function bound now where the hook was defined (unwrapping
    staticmethod, classmethod and property), or the recorded object for a
    closure, which cannot be looked up."""
    if module is None or "<locals>" in qualname:
        return fenced
    try:
        owner = importlib.import_module(module)
        *path, name = qualname.split(".")
        for part in path:
            owner = getattr(owner, part)
        raw = inspect.getattr_static(owner, name)
    except (ImportError, AttributeError):
        return fenced
    if isinstance(raw, (staticmethod, classmethod)):
        raw = raw.__func__
    elif isinstance(raw, property):
        raw = raw.fget
    return raw
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helper_and_imports_follow_the_package() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path().join("pkg");
        std::fs::create_dir_all(pkg.join("sub")).unwrap();
        for f in [
            "pkg/__init__.py",
            "pkg/sub/__init__.py",
            "pkg/hooks.py",
            "pkg/sub/deep.py",
        ] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        let hooks = pkg.join("hooks.py");
        let deep = pkg.join("sub/deep.py");
        assert_eq!(ModulePath::of(&deep).dotted(), "pkg.sub.deep");
        assert_eq!(ModulePath::of(&deep).import_root, dir.path());

        let helper = Helper::for_file(&deep, None, false).unwrap();
        assert_eq!(helper.path, pkg.join("_no_compile.py"));
        assert_eq!(
            helper.import_line(&hooks, true),
            "from ._no_compile import no_compile"
        );
        assert_eq!(
            helper.import_line(&deep, true),
            "from .._no_compile import no_compile"
        );
        assert_eq!(
            helper.import_line(&deep, false),
            "from pkg._no_compile import no_compile"
        );
        let init = pkg.join("sub/__init__.py");
        assert_eq!(
            helper.import_line(&init, true),
            "from .._no_compile import no_compile"
        );

        let chosen = Helper::for_file(&hooks, Some("pkg.sub.fence"), false).unwrap();
        assert_eq!(chosen.path, pkg.join("sub/fence.py"));
        assert_eq!(
            chosen.import_line(&hooks, true),
            "from .sub.fence import no_compile"
        );
        assert!(Helper::for_file(&hooks, Some("other.fence"), false).is_err());

        // Outside a package and outside the current directory: the name it
        // is imported by is unknown.
        let scripts = dir.path().join("scripts");
        std::fs::create_dir(&scripts).unwrap();
        let loose = scripts.join("script.py");
        std::fs::write(&loose, "").unwrap();
        let refused = Helper::for_file(&loose, None, false).unwrap_err();
        assert!(
            refused.contains("not inside a regular package"),
            "{refused}"
        );

        // Beside a regular package, it is a top-level module of that import
        // root, unless it imports relatively (only a package member can).
        let beside = dir.path().join("tool.py");
        std::fs::write(&beside, "").unwrap();
        let helper = Helper::for_file(&beside, None, false).unwrap();
        assert_eq!(helper.path, dir.path().join("_no_compile.py"));
        assert_eq!(
            helper.import_line(&beside, false),
            "from _no_compile import no_compile"
        );
        assert!(Helper::for_file(&beside, None, true).is_err());
    }

    #[test]
    fn helper_module_names_are_ascii_dotted_identifiers() {
        for good in ["_no_compile", "pkg.sub.fences", "Pkg2._x"] {
            assert_eq!(validate_module_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            ".",
            "pkg.",
            ".pkg",
            "pkg..x",
            "a b",
            "a\nb",
            "a\rb",
            "a\u{b}b",
            "a\tb",
            "1x",
            "pkg.class",
            "None",
            "pkg.__init__",
            "p-kg",
            "p/kg",
            "caf\u{e9}",
            "pkg.x;y",
        ] {
            assert!(validate_module_name(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn generated_helpers_are_recognised_and_others_are_not() {
        assert!(is_generated_helper(helper_source("\n").as_bytes()));
        assert!(is_generated_helper(helper_source("\r\n").as_bytes()));
        assert!(!is_generated_helper(
            b"def no_compile(fn):\n    return fn\n"
        ));
        assert!(!is_generated_helper(
            format!("\"\"\"{HELPER_MARKER}\"\"\"\nx = 1\n").as_bytes()
        ));
    }
}
