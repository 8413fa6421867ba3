//! What a class may be, by its bases followed across files: whether an
//! instance can be an `nn.Module`, the only kind of object whose `forward`
//! runs as a model's when `torch.compile` traces it (a pipeline stage, a
//! scheduler or a runner with a method named `forward` is none).
//!
//! A base spelled from `torch` (`nn.Module`, `nn.Linear`,
//! `autograd.Function`) may be one; a project class is followed to its own
//! bases; a base the run cannot see (imported from a library outside the
//! project, or defined nowhere it can find) may be one too, since nothing
//! says otherwise. Only a lineage that ends, on every path, in the builtins
//! (`object`, `Exception`) or in Python's standard library (`abc.ABC`,
//! `typing.Generic`, `enum.Enum`) is no module; so is a class with no base.
//! A base no name spells (`class A(make_base())`) may be anything.

use std::collections::HashMap;
use std::sync::Arc;

use crate::analysis::module_facts::ModuleFacts;
use crate::analysis::project::ProjectIndex;

/// Python's standard library, as `sys.stdlib_module_names` lists it
/// (private modules left out): classes from there are no `nn.Module`.
const STDLIB: &[&str] = &[
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

/// The builtin classes a class statement may name without an import.
const BUILTIN_CLASSES: &[&str] = &[
    "object",
    "type",
    "int",
    "float",
    "complex",
    "bool",
    "str",
    "bytes",
    "bytearray",
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
    "property",
    "BaseException",
    "Exception",
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "EnvironmentError",
    "ImportError",
    "IndexError",
    "KeyError",
    "LookupError",
    "NameError",
    "NotImplementedError",
    "OSError",
    "IOError",
    "RuntimeError",
    "StopIteration",
    "TypeError",
    "ValueError",
    "Warning",
    "UserWarning",
    "DeprecationWarning",
    "RuntimeWarning",
    "FutureWarning",
];

/// torch classes, by their full dotted path, that are no `nn.Module`.
const TORCH_NON_MODULES: &[&str] = &[
    "torch.autograd.Function",
    "torch.autograd.function.Function",
    "torch.autograd.function.InplaceFunction",
    "torch.autograd.function.NestedIOFunction",
    "torch.Tensor",
    "torch.nn.Parameter",
    "torch.nn.parameter.Parameter",
    "torch.nn.parameter.Buffer",
    "torch.nn.Buffer",
    "torch.utils.data.Dataset",
    "torch.utils.data.IterableDataset",
    "torch.utils.data.Sampler",
    "torch.utils.data.DataLoader",
    "torch.optim.Optimizer",
    "torch.optim.optimizer.Optimizer",
];

/// The answers known so far, by module file and class: `None` while a
/// class is being asked (a cycle in the bases adds nothing).
pub(crate) type ModuleClasses = HashMap<(std::path::PathBuf, String), Option<bool>>;

impl ProjectIndex<'_> {
    /// Whether an instance of `class` of `module` may be an `nn.Module`
    /// (see the module's documentation); answers kept in `known`.
    pub(crate) fn may_be_module(
        &self,
        module: &Arc<ModuleFacts>,
        class: &str,
        known: &mut ModuleClasses,
    ) -> bool {
        let key = (module.path.clone(), class.to_owned());
        match known.get(&key) {
            Some(Some(answer)) => return *answer,
            Some(None) => return false,
            None => {}
        }
        known.insert(key.clone(), None);
        let Some(facts) = module.classes.get(class) else {
            // Not found where it was named: nothing says what it is.
            known.insert(key, Some(true));
            return true;
        };
        if facts.computed_base {
            known.insert(key, Some(true));
            return true;
        }
        let answer = facts
            .bases
            .iter()
            .any(|base| self.base_may_be_module(module, base, known));
        known.insert(key, Some(answer));
        answer
    }

    /// The dotted path of the base spelled `base` in `module` where it is
    /// a class of a library the run does not hold: imported from outside
    /// the project, neither torch's nor the standard library's
    /// (`from normlib import RMSNorm`).
    pub(crate) fn library_base(&self, module: &Arc<ModuleFacts>, base: &str) -> Option<String> {
        let base = unsubscripted(base);
        let (full, origin) = self.base_origin(module, base)?;
        (origin == BaseOrigin::Elsewhere
            && !self.in_project(&full, module)
            && self.classes_named(module, base).is_empty())
        .then_some(full)
    }

    /// Where the base spelled `base` in `module` (unsubscripted) is
    /// imported from, with its full path; `None` where it is not imported.
    fn base_origin(&self, module: &Arc<ModuleFacts>, base: &str) -> Option<(String, BaseOrigin)> {
        let full = module.imported_path(base)?;
        let top = full.split('.').next().unwrap_or(&full);
        let origin = if top == "torch" {
            BaseOrigin::Torch
        } else if STDLIB.binary_search(&top).is_ok() && !self.in_project(&full, module) {
            BaseOrigin::StandardLibrary
        } else {
            BaseOrigin::Elsewhere
        };
        Some((full, origin))
    }

    /// Whether the base spelled `base` in `module` may be an `nn.Module`.
    fn base_may_be_module(
        &self,
        module: &Arc<ModuleFacts>,
        base: &str,
        known: &mut ModuleClasses,
    ) -> bool {
        let base = unsubscripted(base);
        match self.base_origin(module, base) {
            // torch's classes that are no module: a custom autograd
            // Function (its `forward` runs through `.apply`, where what it
            // is handed tells whether it is weight work), a tensor or
            // parameter subclass, a dataset, an optimizer.
            Some((full, BaseOrigin::Torch)) => return !TORCH_NON_MODULES.contains(&full.as_str()),
            Some((_, BaseOrigin::StandardLibrary)) => return false,
            Some((_, BaseOrigin::Elsewhere)) => {}
            None if !base.contains('.')
                && !module.classes.contains_key(base)
                && BUILTIN_CLASSES.contains(&base) =>
            {
                return false;
            }
            None => {}
        }
        let found = self.classes_named(module, base);
        if found.is_empty() {
            // From a library, or defined nowhere the run can see.
            return true;
        }
        found
            .iter()
            .any(|(at, class)| self.may_be_module(at, class, known))
    }
}

/// Where a class's base is imported from (see `ProjectIndex::base_origin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BaseOrigin {
    Torch,
    /// The standard library, where the project holds no module of its name.
    StandardLibrary,
    Elsewhere,
}

/// The class a base spells, without its subscript (`Generic[T]`,
/// `Base[int]`: the class subscripted).
fn unsubscripted(base: &str) -> &str {
    base.split('[').next().unwrap_or(base).trim()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_standard_library_is_sorted_for_binary_search() {
        assert!(super::STDLIB.windows(2).all(|w| w[0] < w[1]));
    }
}
