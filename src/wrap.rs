//! The wrap strategy: every offload hook is decorated with `@no_compile`
//! from one helper module per top-level package, which fences it with
//! `torch.compiler.disable` and records it in a registry that
//! `assert_all_disabled()` audits.

use std::path::{Path, PathBuf};

use crate::plan::WRAP_HELPER_FUNCTION;

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
            let Some(name) = dir.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                break;
            };
            if !init.is_file() {
                break;
            }
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
}

impl Helper {
    /// The helper for `file`: `--helper-module` when given (a dotted path
    /// whose first part must be the file's top-level package, or a top-level
    /// module), else `_no_compile` at the root of the file's top-level package.
    pub fn for_file(file: &Path, chosen: Option<&str>) -> Result<Helper, String> {
        let module = ModulePath::of(file);
        let parts: Vec<String> = match chosen {
            Some(dotted) => dotted.split('.').map(str::to_owned).collect(),
            None => {
                let mut parts: Vec<String> = if module.parts.len() > 1 {
                    vec![module.parts[0].clone()]
                } else {
                    Vec::new()
                };
                parts.push(DEFAULT_HELPER.to_owned());
                parts
            }
        };
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!(
                "--helper-module {:?} is not a dotted module name",
                chosen.unwrap_or_default()
            ));
        }
        let in_same_package =
            module.parts.len() > 1 && parts.len() > 1 && parts[0] == module.parts[0];
        if parts.len() > 1 && !in_same_package {
            return Err(format!(
                "{}: helper module {} is not inside this file's top-level package {}",
                file.display(),
                parts.join("."),
                module.parts.first().map_or("(none)", String::as_str)
            ));
        }
        let mut path = module.import_root.clone();
        for part in &parts {
            path.push(part);
        }
        path.set_extension("py");
        Ok(Helper { path, parts })
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

/// The text of a new helper module, in the line ending of the files that use it.
pub fn helper_source(line_ending: &str) -> String {
    HELPER_TEMPLATE.replace('\n', line_ending)
}

const HELPER_TEMPLATE: &str = r#""""Fence hooks from torch.compile, and keep a registry of them.

Generated by hookfence (--strategy wrap). Every offload hook of this package is
decorated with ``@no_compile``: the hook is wrapped with
``torch.compiler.disable``, so dynamo never traces it, and recorded, so that
``assert_all_disabled()`` can audit that none escaped.
"""

import importlib
import inspect

import torch

__all__ = ["no_compile", "registered_hooks", "assert_all_disabled"]

_registry = []


def no_compile(fn):
    """Return ``fn`` fenced with ``torch.compiler.disable``, and record it."""
    fenced = torch.compiler.disable(fn)
    module = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", repr(fn))
    _registry.append((module, qualname, fenced))
    return fenced


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

        let helper = Helper::for_file(&deep, None).unwrap();
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

        let chosen = Helper::for_file(&hooks, Some("pkg.sub.fence")).unwrap();
        assert_eq!(chosen.path, pkg.join("sub/fence.py"));
        assert_eq!(
            chosen.import_line(&hooks, true),
            "from .sub.fence import no_compile"
        );
        assert!(Helper::for_file(&hooks, Some("other.fence")).is_err());

        let loose = dir.path().join("script.py");
        std::fs::write(&loose, "").unwrap();
        let helper = Helper::for_file(&loose, None).unwrap();
        assert_eq!(helper.path, dir.path().join("_no_compile.py"));
        assert_eq!(
            helper.import_line(&loose, false),
            "from _no_compile import no_compile"
        );
    }
}
