//! Configuration: `[tool.hookfence]` in `pyproject.toml`, or a
//! `hookfence.toml`, found the way ruff finds its own: in the directory of the
//! first path given (or the current one) and then each parent, the nearest
//! wins, and in one directory `hookfence.toml` before `pyproject.toml` (which
//! only counts when it has a `[tool.hookfence]` table). `--config PATH` names
//! the file; `--isolated` reads none.

use std::path::{Path, PathBuf};

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde::Deserialize;

/// The keys, as written in the file.
#[derive(Debug, Default, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Settings {
    /// Protocol base classes beyond `ModelHook`.
    #[serde(default)]
    pub hook_bases: Vec<String>,
    /// Hook method names beyond `pre_forward` / `post_forward`.
    #[serde(default)]
    pub hook_methods: Vec<String>,
    /// Extra registration functions: `name` (the hook is the first positional
    /// argument, or `hook=`) or `name:N` (the N-th positional, from 0).
    #[serde(default)]
    pub registrars: Vec<String>,
    /// Extra decorator or function names that count as a fence.
    #[serde(default)]
    pub fence_spellings: Vec<String>,
    /// The decorator to insert, without the `@` (default
    /// `torch.compiler.disable()`).
    pub decorator: Option<String>,
    /// Globs of paths to skip while walking directories.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Fence every hook, not only offload hooks.
    pub all_hooks: Option<bool>,
}

#[derive(Deserialize)]
struct Pyproject {
    tool: Option<Tool>,
}

#[derive(Deserialize)]
struct Tool {
    hookfence: Option<Settings>,
}

/// A configuration file that was read.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file, if one was found.
    pub path: Option<PathBuf>,
    pub settings: Settings,
    /// `exclude`, compiled; matched against paths relative to the file's
    /// directory.
    pub exclude: Option<Filter>,
}

/// A configuration problem, printed as `path[:line:col]: message`.
#[derive(Debug, thiserror::Error)]
#[error("{}{}: {message}", path.display(), at.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
pub struct ConfigError {
    pub path: PathBuf,
    pub at: Option<(usize, usize)>,
    pub message: String,
}

/// The most bytes read from a configuration file: a hundred times the
/// largest `pyproject.toml` of any real project, and `--config /dev/zero`
/// stops at once.
pub const MAX_CONFIG_BYTES: u64 = 4 * crate::source::MIB;

/// Where to look: `--config`, else the nearest file above `start`.
pub fn load(explicit: Option<&Path>, isolated: bool, start: &Path) -> Result<Config, ConfigError> {
    if isolated {
        return Ok(Config::default());
    }
    let (path, text) = match explicit {
        Some(path) => (path.to_path_buf(), None),
        None => match find(start)? {
            Some((path, text)) => (path, Some(text)),
            None => return Ok(Config::default()),
        },
    };
    let text = match text {
        Some(text) => text,
        None => read_text(&path)?,
    };
    read(&path, &text)
}

/// The nearest `hookfence.toml`, or `pyproject.toml` with `[tool.hookfence]`,
/// with its text. A `pyproject.toml` on the way that cannot be read or is
/// not TOML is an error: whether it configures hookfence cannot be told,
/// and skipping it would drop its settings (its `exclude`) silently.
fn find(start: &Path) -> Result<Option<(PathBuf, String)>, ConfigError> {
    let Ok(start) = std::path::absolute(start) else {
        return Ok(None);
    };
    let mut dir = if start.is_dir() {
        Some(start.as_path())
    } else {
        start.parent()
    };
    while let Some(d) = dir {
        let own = d.join("hookfence.toml");
        if own.is_file() {
            let text = read_text(&own)?;
            return Ok(Some((own, text)));
        }
        let pyproject = d.join("pyproject.toml");
        if pyproject.is_file() {
            let text = read_text(&pyproject)?;
            let parsed = toml::from_str::<toml::Table>(&text).map_err(|e| {
                let mut error = toml_error(&pyproject, &text, &e, "");
                error.message.push_str(
                    " (found while looking for hookfence's configuration: fix it, or pass --config FILE or --isolated)",
                );
                error
            })?;
            if parsed
                .get("tool")
                .and_then(|t| t.get("hookfence"))
                .is_some()
            {
                return Ok(Some((pyproject, text)));
            }
        }
        dir = d.parent();
    }
    Ok(None)
}

/// A configuration file's text, read up to [`MAX_CONFIG_BYTES`].
fn read_text(path: &Path) -> Result<String, ConfigError> {
    let error = |message: String| ConfigError {
        path: path.to_path_buf(),
        at: None,
        message,
    };
    let bytes = crate::source::read_file_limited(path, MAX_CONFIG_BYTES, "a configuration file")
        .map_err(|e| error(format!("cannot read: {e}")))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let (line, column) =
            crate::source::text_position(&String::from_utf8_lossy(&e.as_bytes()[..at]), at);
        ConfigError {
            path: path.to_path_buf(),
            at: Some((line, column)),
            message: "not UTF-8 (TOML files are UTF-8)".to_owned(),
        }
    })
}

/// A TOML parse or type error, at its line:col.
fn toml_error(path: &Path, text: &str, e: &toml::de::Error, table: &str) -> ConfigError {
    let at = e
        .span()
        .map(|span| crate::source::text_position(text, span.start));
    ConfigError {
        path: path.to_path_buf(),
        at,
        message: format!("{table}{}", e.message().trim()),
    }
}

fn read(path: &Path, text: &str) -> Result<Config, ConfigError> {
    let error = |at, message: String| ConfigError {
        path: path.to_path_buf(),
        at,
        message,
    };
    let is_pyproject = path.file_name().is_some_and(|n| n == "pyproject.toml");
    if is_pyproject {
        // A syntax error is the file's, not the table's.
        toml::from_str::<toml::Table>(text).map_err(|e| toml_error(path, text, &e, ""))?;
    }
    let parsed = if is_pyproject {
        toml::from_str::<Pyproject>(text)
            .map(|p| p.tool.and_then(|t| t.hookfence).unwrap_or_default())
    } else {
        toml::from_str::<Settings>(text)
    };
    let settings = parsed.map_err(|e| {
        let table = if is_pyproject {
            "[tool.hookfence]: "
        } else {
            ""
        };
        toml_error(path, text, &e, table)
    })?;
    validate(&settings).map_err(|m| error(None, m))?;
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    let exclude = if settings.exclude.is_empty() {
        None
    } else {
        Some(
            Filter::new(&settings.exclude, base)
                .map_err(|m| error(None, format!("exclude: {m}")))?,
        )
    };
    Ok(Config {
        path: Some(path.to_path_buf()),
        settings,
        exclude,
    })
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

fn is_dotted(s: &str) -> bool {
    s.split('.').all(is_identifier)
}

fn validate(settings: &Settings) -> Result<(), String> {
    for name in settings.hook_bases.iter().chain(&settings.hook_methods) {
        if !is_identifier(name) {
            return Err(format!(
                "{name:?} in hook-bases/hook-methods is not a Python name (accepted: names such as \"OffloadHook\" or \"pre_forward\")"
            ));
        }
    }
    for registrar in &settings.registrars {
        let (name, index) = registrar.split_once(':').unwrap_or((registrar, "0"));
        if !is_identifier(name) || index.parse::<usize>().is_err() {
            return Err(format!(
                "registrars: {registrar:?} is not accepted (accepted: \"name\" or \"name:N\", N the hook's positional index from 0)"
            ));
        }
    }
    for spelling in &settings.fence_spellings {
        if !is_dotted(spelling) {
            return Err(format!(
                "fence-spellings: {spelling:?} is not a dotted name (accepted: e.g. \"mylib.compile.skip\")"
            ));
        }
    }
    if let Some(decorator) = &settings.decorator {
        // A newline would end the decorator line early and the rest would
        // become code; no other control character belongs in one either.
        if let Some(c) = decorator
            .chars()
            .find(|&c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'))
        {
            return Err(format!(
                "decorator: {decorator:?} holds the control character {c:?} (accepted: a dotted name with an optional call, e.g. \"torch.compiler.disable()\")"
            ));
        }
        let callee = decorator
            .split_once('(')
            .map_or(decorator.as_str(), |(c, _)| c);
        let call_ok = decorator
            .split_once('(')
            .is_none_or(|(_, rest)| rest.ends_with(')'));
        // The first segment is what the rewrite imports (`import torch`):
        // a bare name would import the decorator as a module.
        if !is_dotted(callee) || !callee.contains('.') || !call_ok {
            return Err(format!(
                "decorator: {decorator:?} is not accepted (accepted: a dotted name with an optional call, e.g. \"torch.compiler.disable()\")"
            ));
        }
    }
    Ok(())
}

/// Globs over paths, the way `.gitignore` reads them: a pattern without a
/// `/` matches a file or directory name at any depth; one with a `/` matches
/// the path relative to the base directory.
#[derive(Debug, Clone)]
pub struct Filter {
    base: PathBuf,
    anywhere: GlobSet,
    rooted: GlobSet,
}

impl Filter {
    pub fn new(patterns: &[String], base: PathBuf) -> Result<Filter, String> {
        let mut anywhere = GlobSetBuilder::new();
        let mut rooted = GlobSetBuilder::new();
        for pattern in patterns {
            let trimmed = pattern.trim_end_matches('/');
            let glob = |p: &str| Glob::new(p).map_err(|e| format!("{pattern:?}: {e}"));
            if trimmed.contains('/') {
                rooted.add(glob(trimmed.trim_start_matches('/'))?);
                rooted.add(glob(&format!("{}/**", trimmed.trim_start_matches('/')))?);
            } else {
                anywhere.add(glob(trimmed)?);
            }
        }
        Ok(Filter {
            base,
            anywhere: anywhere.build().map_err(|e| e.to_string())?,
            rooted: rooted.build().map_err(|e| e.to_string())?,
        })
    }

    /// Whether `path` (as walked) matches any pattern.
    pub fn matches(&self, path: &Path) -> bool {
        let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let base = std::path::absolute(&self.base).unwrap_or_else(|_| self.base.clone());
        let relative = absolute.strip_prefix(&base).unwrap_or(path);
        self.rooted.is_match(relative)
            || relative
                .components()
                .any(|c| self.anywhere.is_match(Path::new(c.as_os_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn nearest_file_wins_and_pyproject_needs_the_table() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("a/b");
        std::fs::create_dir_all(&sub).unwrap();
        write(
            dir.path(),
            "pyproject.toml",
            "[tool.hookfence]\nall-hooks = true\n",
        );
        write(
            &dir.path().join("a"),
            "pyproject.toml",
            "[project]\nname = 'x'\n",
        );
        let config = load(None, false, &sub).unwrap();
        assert_eq!(
            config.path.as_deref(),
            Some(dir.path().join("pyproject.toml").as_path())
        );
        assert_eq!(config.settings.all_hooks, Some(true));

        write(
            &dir.path().join("a"),
            "hookfence.toml",
            "hook-methods = ['offload_step']\n",
        );
        let config = load(None, false, &sub).unwrap();
        assert_eq!(config.settings.hook_methods, ["offload_step"]);
        assert!(load(None, true, &sub).unwrap().path.is_none());
    }

    #[test]
    fn bad_keys_and_values_name_the_file_and_what_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), "hookfence.toml", "hook-base = ['X']\n");
        let err = load(Some(&path), false, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(&format!("{}:1:1: ", path.display())),
            "{err}"
        );
        assert!(
            err.contains("unknown field `hook-base`") && err.contains("hook-bases"),
            "{err}"
        );

        let path = write(
            dir.path(),
            "pyproject.toml",
            "[tool.hookfence]\nall-hooks = 'yes'\n",
        );
        let err = load(Some(&path), false, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("pyproject.toml:2:13: [tool.hookfence]: invalid type"),
            "{err}"
        );

        let path = write(
            dir.path(),
            "hookfence.toml",
            "registrars = ['add_hook:x']\n",
        );
        let err = load(Some(&path), false, dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("\"name:N\""), "{err}");

        let path = write(
            dir.path(),
            "hookfence.toml",
            "decorator = '@torch.compiler.disable'\n",
        );
        assert!(load(Some(&path), false, dir.path()).is_err());
    }

    #[test]
    fn filter_reads_globs_like_gitignore() {
        let base = PathBuf::from("/project");
        let filter = Filter::new(
            &["vendored".into(), "src/gen/*.py".into(), "*_pb2.py".into()],
            base,
        )
        .unwrap();
        assert!(filter.matches(Path::new("/project/a/vendored/x.py")));
        assert!(filter.matches(Path::new("/project/src/gen/y.py")));
        assert!(filter.matches(Path::new("/project/deep/m_pb2.py")));
        assert!(!filter.matches(Path::new("/project/src/hooks.py")));
        assert!(!filter.matches(Path::new("/project/other/src/gen/y.py")));
    }
}
