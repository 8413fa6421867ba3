//! Helpers shared by the integration tests that run the binary.

#![allow(dead_code)] // each test crate uses a part

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hookfence");

/// Longest any single command may run before the test fails (a hang, e.g. a
/// FIFO being opened, must fail the test rather than stall the suite).
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// What a finished child printed, and how it exited.
pub struct Finished {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub code: Option<i32>,
}

/// What a finished hookfence run left behind.
pub struct Run {
    pub stdout: Vec<u8>,
    pub stderr: String,
    pub code: Option<i32>,
}

impl std::fmt::Display for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit code: {:?}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.code,
            String::from_utf8_lossy(&self.stdout),
            self.stderr
        )
    }
}

impl Run {
    /// Asserts the exit code, printing everything when it is wrong.
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(self.code, Some(code), "unexpected exit code\n{self}");
        self
    }

    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
}

impl From<Finished> for Run {
    fn from(done: Finished) -> Run {
        Run {
            stdout: done.stdout,
            stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
            code: done.code,
        }
    }
}

/// Waits for a child spawned with piped stdout and stderr, draining both,
/// and fails the test (killing the child) after [`TIMEOUT`].
pub fn finish(mut child: Child, what: &str) -> Finished {
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Finished {
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
        code: status.code(),
    }
}

/// Every regular file below `root` (symlinks not followed), with its bytes,
/// by path relative to `root`.
pub fn file_contents(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(root, &path, out);
            } else if meta.is_file() {
                let rel = path.strip_prefix(root).unwrap().to_path_buf();
                out.insert(rel, fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// A throwaway project directory; each test file adds the helpers it needs
/// in an `impl Project` of its own.
pub struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    /// Creates a project holding `files`, given as (relative path, contents).
    pub fn new(files: &[(&str, &[u8])]) -> Project {
        let project = Project {
            dir: tempfile::tempdir().expect("create temp dir"),
        };
        for (rel, bytes) in files {
            project.write(rel, bytes);
        }
        project
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root().join(rel)
    }

    pub fn write(&self, rel: &str, bytes: impl AsRef<[u8]>) {
        let path = self.path(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        fs::read(self.path(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    pub fn read_str(&self, rel: &str) -> String {
        String::from_utf8(self.read(rel)).unwrap()
    }
}

impl Project {
    /// Runs hookfence with `args` at the project root, stdin closed and
    /// stdout/stderr piped (no terminal).
    pub fn hookfence(&self, args: &[&str]) -> Run {
        self.hookfence_in(".", args)
    }

    /// [`Project::hookfence`] with its cwd at `dir`, below the root.
    pub fn hookfence_in(&self, dir: &str, args: &[&str]) -> Run {
        let child = std::process::Command::new(BIN)
            .args(args)
            .current_dir(self.path(dir))
            .env_remove("NO_COLOR")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        finish(child, &format!("hookfence {args:?} in {dir}")).into()
    }
}

/// A package with two offload hooks in two modules ([`HOOK`], and a
/// subclass of its base in a subpackage that imports it relatively).
pub fn wrap_project() -> Project {
    Project::new(&[
        ("pkg/__init__.py", b""),
        ("pkg/hooks.py", HOOK.as_bytes()),
        ("pkg/sub/__init__.py", b""),
        (
            "pkg/sub/offload.py",
            b"from ..hooks import ModelHook\n\n\nclass DiskOffload(ModelHook):\n    def post_forward(self, module, output):\n        module.cpu()\n        return output\n",
        ),
    ])
}

/// One offload hook (`CpuOffload.pre_forward`) next to a base class whose
/// hook does nothing and is not fenced.
pub const HOOK: &str = r#"import torch

class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

class CpuOffload(ModelHook):
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#;

/// [`HOOK`] after hookfence.
pub const HOOK_FENCED: &str = r#"import torch

class ModelHook:
    def pre_forward(self, module, *args, **kwargs):
        return args, kwargs

class CpuOffload(ModelHook):
    @torch.compiler.disable()
    def pre_forward(self, module, *args, **kwargs):
        module.to("cuda")
        return args, kwargs
"#;

/// A stand-in for torch, enough to import fenced modules with CPython:
/// `torch.compiler.disable` (and `torch._dynamo.disable`) returns a wrapper
/// of the function marked the way dynamo's own `disable` marks it
/// (`_torchdynamo_disable = True`, `_torchdynamo_orig_callable`,
/// `functools.wraps`).
const STUB_TORCH: &str = r#"import functools
import types

def _disable(fn=None, recursive=True, reason=None):
    def mark(f):
        @functools.wraps(f)
        def disabled(*args, **kwargs):
            return f(*args, **kwargs)
        disabled._torchdynamo_disable = True
        disabled._torchdynamo_orig_callable = f
        return disabled
    return mark if fn is None else mark(fn)

compiler = types.SimpleNamespace(disable=_disable)
"#;

/// `torch._dynamo` of the stand-in.
const STUB_DYNAMO: &str = "from torch import _disable as disable\n";

/// A stand-in for pytest, enough to import a generated test file and call
/// its tests by hand: `pytest.mark.parametrize` leaves the function as it is.
const STUB_PYTEST: &str = r#"import types

mark = types.SimpleNamespace(parametrize=lambda *args, **kwargs: (lambda fn: fn))
"#;

/// Imports `modules` with CPython, `root` first on `sys.path` after a stub
/// `torch` (see [`STUB_TORCH`]) and a stub `pytest`, then runs `then` (Python statements, the
/// modules imported by name). Writes no bytecode. Returns what CPython
/// printed when it fails.
pub fn python_imports(root: &Path, modules: &[&str], then: &str) -> Result<(), String> {
    let stub = tempfile::tempdir().expect("stub dir");
    fs::create_dir(stub.path().join("torch")).unwrap();
    fs::write(stub.path().join("torch/__init__.py"), STUB_TORCH).unwrap();
    fs::create_dir(stub.path().join("torch/_dynamo")).unwrap();
    fs::write(stub.path().join("torch/_dynamo/__init__.py"), STUB_DYNAMO).unwrap();
    fs::write(stub.path().join("pytest.py"), STUB_PYTEST).unwrap();
    let imports: String = modules.iter().map(|m| format!("import {m}\n")).collect();
    let code = format!("import sys\nsys.path[:0] = sys.argv[1:3]\n{imports}{then}\n");
    let out = std::process::Command::new("python3")
        .arg("-B")
        .arg("-c")
        .arg(&code)
        .arg(stub.path())
        .arg(root)
        .current_dir(stub.path())
        .output()
        .expect("python3 is needed to import the rewritten modules");
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "CPython could not import {modules:?}:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A stage object's methods move weights; two registered hooks call them
/// on every stage: `enter`, fenced by its authors, and `leave`, which the
/// run fences. `refresh` is also called by `again`, which a comment leaves
/// alone.
pub const COVERED: &[(&str, &[u8])] = &[
    ("pkg/__init__.py", b""),
    (
        "pkg/stages.py",
        b"class DeviceStage:
    def __init__(self, device):
        self.device = device

    def bring_in(self, module, *args):
        for p in module.parameters(recurse=False):
            p.data = p.data.to(self.device)

    def send_back(self, module, *args):
        for p in module.parameters(recurse=False):
            p.data = p.data.to(\"cpu\")

    def refresh(self, module, *args):
        module.to(self.device)
",
    ),
    (
        "pkg/install.py",
        b"import torch

from pkg.stages import DeviceStage


def install(model, device):
    stages = [DeviceStage(device)]

    @torch.compiler.disable()
    def enter(module, args):
        for stage in stages:
            stage.bring_in(module, *args)

    def leave(module, args, output):
        for stage in stages:
            stage.send_back(module, output)
            stage.refresh(module, output)

    # hookfence: ignore[measured]
    def again(module, args):
        for stage in stages:
            stage.refresh(module, *args)

    for sub in model.modules():
        sub.register_forward_pre_hook(enter)
        sub.register_forward_hook(leave)
        sub.register_forward_pre_hook(again)
",
    ),
];
