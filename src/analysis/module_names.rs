//! Python's names for files: a file's dotted module name, its package, the
//! directory its top-level package is imported from, and relative imports
//! made absolute.

use std::path::{Path, PathBuf};

/// The dotted module name of a file: its stem, under every enclosing
/// directory that holds an `__init__.py`.
pub fn module_name(path: &Path, listings: &crate::analysis::listings::Listings) -> String {
    // The directories above it, by name: from inside a package
    // (`hooks.py`, `../pkg/hooks.py`) only the absolute path names them.
    let walked = lexical_absolute(path);
    let mut parts: Vec<String> = Vec::new();
    let stem = walked
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if stem != "__init__" {
        parts.push(stem);
    }
    let mut dir = walked.parent();
    while let Some(d) = dir {
        if !listings.is_file(&d.join("__init__.py")) {
            break;
        }
        match d.file_name() {
            Some(name) => parts.push(name.to_string_lossy().into_owned()),
            None => break,
        }
        dir = d.parent();
    }
    parts.reverse();
    parts.join(".")
}

/// `path` made absolute against the current directory, with `.` and `..`
/// folded by their text (as Python's import system reads `sys.path`
/// entries): the directories a relative path stands in, by name.
pub fn lexical_absolute(path: &Path) -> std::path::PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = std::path::PathBuf::new();
    for component in absolute.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The package a module's relative imports start from.
pub fn package_of(path: &Path, module: &str) -> String {
    let is_package = path.file_stem().is_some_and(|s| s == "__init__");
    if is_package {
        module.to_owned()
    } else {
        module
            .rsplit_once('.')
            .map_or(String::new(), |(p, _)| p.to_owned())
    }
}

/// A relative import's path, as the matcher spells it (`{module}.{name}`:
/// `.x.y` for `from .x import y`, `..y` for `from . import y`), made absolute
/// from `package`; absolute paths as they are.
pub fn absolute(path: &str, package: &str) -> String {
    let mut dots = path.chars().take_while(|&c| c == '.').count();
    if dots == 0 {
        return path.to_owned();
    }
    // `from . import y` reads `..y`: one dot is the joint.
    if dots >= 2 && !path[dots..].contains('.') {
        dots -= 1;
    }
    let mut base: Vec<&str> = if package.is_empty() {
        Vec::new()
    } else {
        package.split('.').collect()
    };
    for _ in 1..dots {
        base.pop();
    }
    let rest = &path[dots..];
    let rest = rest.trim_start_matches('.');
    if !rest.is_empty() {
        base.push(rest);
    }
    base.join(".")
}

/// The directory a file's top-level package is imported from.
pub(super) fn import_root(path: &Path, module: &str) -> Option<PathBuf> {
    let depth = module.split('.').count();
    let is_package = path.file_stem().is_some_and(|s| s == "__init__");
    let up = if is_package { depth } else { depth - 1 };
    // As the path spells it where it names enough directories
    // (`pkg/hooks.py` -> ``), else from its absolute form (`hooks.py` run
    // from inside `pkg`).
    let climb = |path: &Path| -> Option<PathBuf> {
        let mut root = path.parent()?;
        for _ in 0..up {
            root.file_name()?;
            root = root.parent()?;
        }
        Some(root.to_path_buf())
    };
    climb(path).or_else(|| climb(&lexical_absolute(path)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_imports_resolve_from_the_package() {
        // from .b import c
        assert_eq!(absolute(".b.c", "pkg.sub"), "pkg.sub.b.c");
        // from ..b import c
        assert_eq!(absolute("..b.c", "pkg.sub"), "pkg.b.c");
        // from . import c
        assert_eq!(absolute("..c", "pkg.sub"), "pkg.sub.c");
        // from .. import c
        assert_eq!(absolute("...c", "pkg.sub"), "pkg.c");
        assert_eq!(absolute("x.y", "pkg"), "x.y");
    }
}
