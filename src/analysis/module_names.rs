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
        // A directory whose name is no identifier is no package, whatever
        // it holds (`my-repo/__init__.py`): no import can name it.
        if !d
            .file_name()
            .is_some_and(|n| is_identifier(&n.to_string_lossy()))
        {
            break;
        }
        if !listings.is_file(&d.join("__init__.py")) {
            // A directory without one inside a package is a namespace
            // package of it (`pkg/offload/m.py` under a regular `pkg` is
            // `pkg.offload.m`, as Python finds it on `pkg.__path__`): it and
            // the directories up to that package are part of the name.
            let Some(package) = enclosing_package(d, listings) else {
                break;
            };
            let mut gap = Some(d);
            while let Some(g) = gap.filter(|g| *g != package) {
                match g.file_name() {
                    Some(name) => parts.push(name.to_string_lossy().into_owned()),
                    None => break,
                }
                gap = g.parent();
            }
            dir = Some(package);
            continue;
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

/// Whether `name` can be a Python identifier (a package's name): a letter
/// or `_`, then letters, digits or `_`.
fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// How many directories without an `__init__.py` in a row a namespace
/// package may nest inside a regular one and still be read as part of it.
const MOST_NAMESPACE_DEPTH: usize = 2;

/// The regular package a directory without an `__init__.py` sits in, at
/// most [`MOST_NAMESPACE_DEPTH`] directories up: the nearest ancestor with
/// one. None where none is that near (a source root, a scripts folder).
fn enclosing_package<'p>(
    dir: &'p Path,
    listings: &crate::analysis::listings::Listings,
) -> Option<&'p Path> {
    let mut up = dir.parent();
    for _ in 0..MOST_NAMESPACE_DEPTH {
        let d = up?;
        if !is_identifier(&d.file_name()?.to_string_lossy()) {
            return None;
        }
        if listings.is_file(&d.join("__init__.py")) {
            return Some(d);
        }
        up = d.parent();
    }
    None
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

    /// Files laid out under a fresh directory: `(relative path, text)`.
    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for file in files {
            let path = dir.path().join(file);
            std::fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
            std::fs::write(&path, "").expect("a file");
        }
        dir
    }

    fn name_of(dir: &tempfile::TempDir, file: &str) -> String {
        let listings = crate::analysis::listings::Listings::default();
        module_name(&dir.path().join(file), &listings)
    }

    #[test]
    fn a_directory_without_init_inside_a_package_is_a_namespace_package_of_it() {
        let dir = tree(&[
            "pkg/__init__.py",
            "pkg/offload/manager.py",
            "pkg/a/b/deep.py",
            "pkg/a/b/c/deeper.py",
            "scripts/tools/run.py",
            "pkg/sub/__init__.py",
            "pkg/sub/ns/m.py",
        ]);
        assert_eq!(
            name_of(&dir, "pkg/offload/manager.py"),
            "pkg.offload.manager"
        );
        assert_eq!(name_of(&dir, "pkg/a/b/deep.py"), "pkg.a.b.deep");
        // Three folders without one in a row: no package is that near.
        assert_eq!(name_of(&dir, "pkg/a/b/c/deeper.py"), "deeper");
        // No package above at all: a script's folder is its import root.
        assert_eq!(name_of(&dir, "scripts/tools/run.py"), "run");
        assert_eq!(name_of(&dir, "pkg/sub/ns/m.py"), "pkg.sub.ns.m");
        let module = name_of(&dir, "pkg/offload/manager.py");
        let root = import_root(&dir.path().join("pkg/offload/manager.py"), &module);
        assert_eq!(root.as_deref(), Some(dir.path()));
    }

    #[test]
    fn a_directory_whose_name_is_no_identifier_is_no_package() {
        let dir = tree(&[
            "my-repo/__init__.py",
            "my-repo/pkg/__init__.py",
            "my-repo/pkg/m.py",
            "my-repo/pkg/ns/n.py",
            "my-repo/x.py",
            "ok/__init__.py",
            "ok/2d/__init__.py",
            "ok/2d/m.py",
        ]);
        assert_eq!(name_of(&dir, "my-repo/pkg/m.py"), "pkg.m");
        assert_eq!(name_of(&dir, "my-repo/pkg/ns/n.py"), "pkg.ns.n");
        assert_eq!(name_of(&dir, "my-repo/x.py"), "x");
        assert_eq!(name_of(&dir, "ok/2d/m.py"), "m");
        assert!(is_identifier("_private") && is_identifier("caf\u{e9}"));
        assert!(
            !is_identifier("a-b")
                && !is_identifier("a+b")
                && !is_identifier("")
                && !is_identifier("1a")
        );
    }
}
