//! Where a file may compile a function where it is defined: a decorator
//! that is `torch.compile` (or dynamo's `optimize`), however the file
//! imports it, told from the text without parsing it (the prefilter's
//! test for the roots of `analysis::roots`).

/// A decorator whose dotted expression ends in `compile` or `optimize`
/// (`@torch.compile`, `@torch.compile(mode=...)`, `@compile`,
/// `@ torch._dynamo.optimize("inductor")`), or one that names what the
/// file binds to `compile` (`from torch import compile as tc` or
/// `tc = torch.compile`, then `@tc(...)`): a function compiled where it is
/// defined is a root whatever its file spells otherwise. What the
/// decorator really is, the parsed file's imports tell.
pub fn compiles_where_defined(normal: &str) -> bool {
    static DECORATOR: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"(?m)^[ \t]*@[ \t]*(?:\w+[ \t]*\.[ \t]*)*(?:compile|optimize)\b")
            .expect("a fixed pattern")
    });
    if DECORATOR.is_match(normal) {
        return true;
    }
    let bytes = normal.as_bytes();
    // The name bound to `compile` at each spelling of it: `compile as NAME`
    // after it, `NAME = torch.compile` before it.
    memchr::memmem::find_iter(bytes, b"compile").any(|at| {
        let end = at + "compile".len();
        if !whole_word(bytes, at, end) {
            return false;
        }
        let alias = as_name(bytes, end).or_else(|| assigned_name(bytes, at));
        alias.is_some_and(|alias| decorated_with_name(bytes, alias))
    })
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn is_word(b: u8) -> bool {
    b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80
}

/// Whether `bytes[at..end]` stands as a whole word.
fn whole_word(bytes: &[u8], at: usize, end: usize) -> bool {
    (at == 0 || !is_word(bytes[at - 1])) && bytes.get(end).is_none_or(|&b| !is_word(b))
}

/// Where the blanks that end just before `i` start.
fn blanks_before(bytes: &[u8], mut i: usize) -> usize {
    while i > 0 && is_blank(bytes[i - 1]) {
        i -= 1;
    }
    i
}

/// Where the blanks after `i` end.
fn blanks_after(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(|&b| is_blank(b)) {
        i += 1;
    }
    i
}

/// Where a decorator's `@` stands before the name that starts at `name`,
/// blanks around it: the index just past what comes before the `@` and its
/// blanks (a line's start, or a comment's `#`), or `None` where no `@` is
/// there.
pub(crate) fn at_sign_before(bytes: &[u8], name: usize) -> Option<usize> {
    let i = blanks_before(bytes, name);
    (i > 0 && bytes[i - 1] == b'@').then(|| blanks_before(bytes, i - 1))
}

/// `NAME` in ` as NAME` starting at `from`.
fn as_name(bytes: &[u8], from: usize) -> Option<&[u8]> {
    let spaced = blanks_after(bytes, from);
    if spaced == from || !bytes[spaced..].starts_with(b"as") {
        return None;
    }
    let start = blanks_after(bytes, spaced + 2);
    if start == spaced + 2 {
        return None;
    }
    let mut end = start;
    while bytes.get(end).is_some_and(|&b| is_word(b)) {
        end += 1;
    }
    (end > start).then(|| &bytes[start..end])
}

/// `NAME` in `NAME = torch.compile`, where `compile` starts at `at`.
fn assigned_name(bytes: &[u8], at: usize) -> Option<&[u8]> {
    let mut i = blanks_before(bytes, at);
    if i == 0 || bytes[i - 1] != b'.' {
        return None;
    }
    i = blanks_before(bytes, i - 1);
    if !bytes[..i].ends_with(b"torch") {
        return None;
    }
    i = blanks_before(bytes, i - "torch".len());
    if i == 0
        || bytes[i - 1] != b'='
        || (i >= 2 && matches!(bytes[i - 2], b'=' | b'!' | b'<' | b'>'))
    {
        return None;
    }
    let end = blanks_before(bytes, i - 1);
    let mut start = end;
    while start > 0 && is_word(bytes[start - 1]) {
        start -= 1;
    }
    (end > start).then(|| &bytes[start..end])
}

/// Whether a line starts with `@NAME` (blanks around the `@`), `NAME` a
/// whole word.
fn decorated_with_name(bytes: &[u8], name: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, name).any(|at| {
        whole_word(bytes, at, at + name.len())
            && at_sign_before(bytes, at).is_some_and(|i| i == 0 || bytes[i - 1] == b'\n')
    })
}

#[cfg(test)]
mod tests {
    use super::compiles_where_defined;

    #[test]
    fn decorators_that_may_be_torch_compile_and_names_bound_to_it() {
        for text in [
            "@torch.compile\ndef f(): ...\n",
            "    @torch.compile(mode='x')\n    def f(self): ...\n",
            "@ torch . _dynamo . optimize('inductor')\ndef f(): ...\n",
            "from torch import compile as tc\n@tc(dynamic=True)\ndef f(): ...\n",
            "from torch import (\n    compile as tc,\n)\n  @ tc\ndef f(): ...\n",
            "tc = torch.compile\n@tc\ndef f(): ...\n",
            "tc=torch .compile\n@tc\ndef f(): ...\n",
        ] {
            assert!(compiles_where_defined(text), "{text:?}");
        }
        for text in [
            "@torch.compiler.disable\ndef f(): ...\n",
            "@compile_compatible_method_lru_cache(maxsize=1)\ndef f(): ...\n",
            "p = re.compile('x')\n@functools.cache\ndef f(): ...\n",
            "from torch import compile as tc\n@tcx\ndef f(): ...\n",
            "from torch import compile as tc\nx = tc(f)  # @tc\n",
            "ok = tc == torch.compile\n@tc\ndef f(): ...\n",
            "# @torch.compile\ndef f(): ...\n",
        ] {
            assert!(!compiles_where_defined(text), "{text:?}");
        }
    }
}
