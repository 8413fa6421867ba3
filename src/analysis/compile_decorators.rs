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
    let word = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    let blank = |b: u8| b == b' ' || b == b'\t';
    // The name bound to `compile` at each spelling of it: `compile as NAME`
    // after it, `NAME = torch.compile` before it.
    memchr::memmem::find_iter(bytes, b"compile").any(|at| {
        let end = at + "compile".len();
        if (at > 0 && word(bytes[at - 1])) || bytes.get(end).is_some_and(|&b| word(b)) {
            return false;
        }
        let alias =
            as_name(bytes, end, &blank, &word).or_else(|| assigned_name(bytes, at, &blank, &word));
        alias.is_some_and(|alias| decorated_with_name(bytes, alias, &blank, &word))
    })
}

/// `NAME` in ` as NAME` starting at `from`.
fn as_name<'t>(
    bytes: &'t [u8],
    from: usize,
    blank: &dyn Fn(u8) -> bool,
    word: &dyn Fn(u8) -> bool,
) -> Option<&'t [u8]> {
    let mut i = from;
    let skip = |mut i: usize| {
        while bytes.get(i).is_some_and(|&b| blank(b)) {
            i += 1;
        }
        i
    };
    let spaced = skip(i);
    if spaced == i || !bytes[spaced..].starts_with(b"as") {
        return None;
    }
    i = spaced + 2;
    let start = skip(i);
    if start == i {
        return None;
    }
    let mut end = start;
    while bytes.get(end).is_some_and(|&b| word(b)) {
        end += 1;
    }
    (end > start).then(|| &bytes[start..end])
}

/// `NAME` in `NAME = torch.compile`, where `compile` starts at `at`.
fn assigned_name<'t>(
    bytes: &'t [u8],
    at: usize,
    blank: &dyn Fn(u8) -> bool,
    word: &dyn Fn(u8) -> bool,
) -> Option<&'t [u8]> {
    let back = |mut i: usize| {
        while i > 0 && blank(bytes[i - 1]) {
            i -= 1;
        }
        i
    };
    let mut i = back(at);
    if i == 0 || bytes[i - 1] != b'.' {
        return None;
    }
    i = back(i - 1);
    if !bytes[..i].ends_with(b"torch") {
        return None;
    }
    i = back(i - "torch".len());
    if i == 0
        || bytes[i - 1] != b'='
        || (i >= 2 && matches!(bytes[i - 2], b'=' | b'!' | b'<' | b'>'))
    {
        return None;
    }
    let end = back(i - 1);
    let mut start = end;
    while start > 0 && word(bytes[start - 1]) {
        start -= 1;
    }
    (end > start).then(|| &bytes[start..end])
}

/// Whether a line starts with `@NAME` (blanks around the `@`), `NAME` a
/// whole word.
fn decorated_with_name(
    bytes: &[u8],
    name: &[u8],
    blank: &dyn Fn(u8) -> bool,
    word: &dyn Fn(u8) -> bool,
) -> bool {
    memchr::memmem::find_iter(bytes, name).any(|at| {
        let end = at + name.len();
        if bytes.get(end).is_some_and(|&b| word(b)) || (at > 0 && word(bytes[at - 1])) {
            return false;
        }
        let mut i = at;
        while i > 0 && blank(bytes[i - 1]) {
            i -= 1;
        }
        if i == 0 || bytes[i - 1] != b'@' {
            return false;
        }
        i -= 1;
        while i > 0 && blank(bytes[i - 1]) {
            i -= 1;
        }
        i == 0 || bytes[i - 1] == b'\n'
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
