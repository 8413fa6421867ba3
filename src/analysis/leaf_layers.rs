//! torch's layers that hold a weight and run one op with it (`nn.Linear`,
//! `nn.Conv2d`, `nn.Embedding`, `nn.LayerNorm`, ...), by name: what the
//! analysis asks of a class's lineage (see `layer_transfer`), and a cheap
//! reading of a file's text before it is parsed (whether a class there
//! may derive from one, one of the signs that make a file's forwards roots,
//! `prefilter::may_define_forward`).

/// torch's layers that hold a weight and run one op with it (their names in
/// `torch.nn`, where every one of them is exported).
const TORCH_LEAF_LAYERS: &[&str] = &[
    "BatchNorm1d",
    "BatchNorm2d",
    "BatchNorm3d",
    "Bilinear",
    "Conv1d",
    "Conv2d",
    "Conv3d",
    "ConvTranspose1d",
    "ConvTranspose2d",
    "ConvTranspose3d",
    "Embedding",
    "EmbeddingBag",
    "GroupNorm",
    "InstanceNorm1d",
    "InstanceNorm2d",
    "InstanceNorm3d",
    "LayerNorm",
    "LazyConv1d",
    "LazyConv2d",
    "LazyConv3d",
    "LazyLinear",
    "Linear",
    "PReLU",
    "RMSNorm",
];

/// Leaf layers of libraries outside torch, each a subclass of one of
/// torch's (`bitsandbytes.nn.Linear8bitLt` derives from `nn.Linear`): the
/// run cannot read their bases, so they are models, as a library's
/// functions are (see `effects::models`).
const LIBRARY_LEAF_LAYERS: &[&str] = &[
    "bitsandbytes.nn.Embedding",
    "bitsandbytes.nn.Linear4bit",
    "bitsandbytes.nn.Linear8bitLt",
    "bitsandbytes.nn.LinearFP4",
    "bitsandbytes.nn.LinearNF4",
    "bitsandbytes.nn.StableEmbedding",
    "bitsandbytes.nn.modules.Embedding",
    "bitsandbytes.nn.modules.Linear4bit",
    "bitsandbytes.nn.modules.Linear8bitLt",
    "bitsandbytes.nn.modules.LinearFP4",
    "bitsandbytes.nn.modules.LinearNF4",
    "bitsandbytes.nn.modules.StableEmbedding",
];

/// Whether the dotted path `full` names one of torch's leaf layers
/// (`torch.nn.Linear`, `torch.nn.modules.linear.Linear`) or a library's.
pub fn names_leaf_layer(full: &str) -> bool {
    if LIBRARY_LEAF_LAYERS.contains(&full) {
        return true;
    }
    let Some(rest) = full.strip_prefix("torch.nn.") else {
        return false;
    };
    let (package, last) = rest.rsplit_once('.').unwrap_or(("", rest));
    (package.is_empty() || package.starts_with("modules")) && TORCH_LEAF_LAYERS.contains(&last)
}

/// Which of a file's forwards can be roots, by its text (see
/// `prefilter::may_define_forward`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardRoots {
    /// None: it defines no forward, or spells no sign.
    None,
    /// Only those of leaf layers copying their weights in (see
    /// `analysis::layer_transfer`): the file defines a subclass of a torch
    /// leaf layer and spells no other sign of weight work.
    LayersOnly,
    /// Every forward, for its steps too.
    All,
}

/// Whether `text` may define a subclass of one of torch's leaf layers: a
/// line that starts (after its indentation) with `class`, whose bases,
/// before the line ends, spell a leaf layer's name as a whole word at the
/// end of a dotted name (`class CustomLinear(torch.nn.Linear, Mixin):`,
/// `class Conv(nn.Conv2d):`, `class L(Linear):`). Read in one pass over
/// the lines without parsing: a base list split over lines is read up to
/// the first line's end, and a name written in a string there counts too;
/// the analysis then follows each class's real bases.
pub fn may_subclass_a_leaf_layer(text: &str) -> bool {
    !leaf_class_bodies(text).is_empty()
}

/// The byte ranges of the bodies of the classes of `text` whose base list,
/// on their `class` line, names one of torch's leaf layers or a class of
/// the same file named so before (`class Base(nn.Embedding)`, then `class
/// Autocast(Base, Mixin)`): a body runs to the next line that is neither
/// blank nor a comment and is indented no deeper than its `class` line.
fn leaf_class_bodies(text: &str) -> Vec<std::ops::Range<usize>> {
    let bytes = text.as_bytes();
    let is_name = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    let mut names: Vec<&[u8]> = Vec::new();
    let mut open: Vec<(usize, usize)> = Vec::new();
    let mut bodies = Vec::new();
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let line = &bytes[start..end];
        let code = line.trim_ascii_start();
        let indent = line.len() - code.len();
        if !code.is_empty() && code[0] != b'#' {
            while open.last().is_some_and(|&(at, _)| at >= indent) {
                if let Some((_, body)) = open.pop() {
                    bodies.push(body..start);
                }
            }
        }
        // A leaf layer imported under another name (`from lib import
        // RMSNorm as LibRMSNorm`, on the `import` line or in its
        // parentheses): the alias names one too.
        for at in memchr::memmem::find_iter(code, b" as ") {
            let word_start = code[..at]
                .iter()
                .rposition(|&b| !is_name(b))
                .map_or(0, |i| i + 1);
            let alias = &code[at + 4..];
            let alias = &alias[..alias.iter().take_while(|&&b| is_name(b)).count()];
            if !alias.is_empty() && names_a_leaf_word(&code[word_start..at]) {
                names.push(alias);
            }
        }
        if let Some(rest) = code.strip_prefix(b"class")
            && rest.first().is_some_and(|b| b.is_ascii_whitespace())
            && let Some(paren) = memchr::memchr(b'(', rest)
        {
            let name = rest[..paren].trim_ascii();
            let bases = &rest[paren + 1..];
            let bases = &bases[..memchr::memchr(b')', bases).unwrap_or(bases.len())];
            let names_earlier = bases
                .split(|&b| !is_name(b))
                .any(|word| !word.is_empty() && names.contains(&word));
            if bases_name_a_leaf_layer(bases) || names_earlier {
                names.push(name);
                open.push((indent, end));
            }
        }
        start = end + 1;
    }
    bodies.extend(open.into_iter().map(|(_, body)| body..bytes.len()));
    bodies
}

/// Builtins that only look at the object they are handed (`isinstance`,
/// `getattr`, `len`, `super`, ...): handing a layer or what it holds to one
/// runs nothing of it.
pub(crate) const LOOKS_ONLY: &[&str] = &[
    "isinstance",
    "getattr",
    "hasattr",
    "setattr",
    "delattr",
    "super",
    "id",
    "type",
    "len",
    "str",
    "repr",
    "print",
    "vars",
    "callable",
    "hash",
    "dir",
];

/// Whether `text` may define a leaf layer that brings its weight in (see
/// `layer_transfer`): in the body of a class that subclasses one of
/// torch's leaf layers (see [`leaf_class_bodies`]) it hands a layer or its
/// weight to a function, both read without parsing; a model's attention
/// handing `self` to its kernel in another class of the file is none.
pub fn may_define_a_transfer_layer(text: &str) -> bool {
    let bodies = leaf_class_bodies(text);
    !bodies.is_empty() && hands_a_layer_over(text, |at| bodies.iter().any(|b| b.contains(&at)))
}

/// Whether `text` may hand a layer, or its weight, to a function: a call
/// (on a line that is no `def` or `class` line) whose first argument is
/// `self`, `self.weight`, `self.bias`, `self.data` or another attribute
/// handed with a device (`bring(self.scale, x.device)`), of a callee named
/// otherwise than a builtin that only looks at an object (`isinstance`,
/// `getattr`, `super`, ...) or a dunder (`__init__`). A leaf layer
/// bringing its weight in does it so (`fetch(self, x)`,
/// `cast_to_device(self.weight, x.device)`); read without parsing, it keeps
/// a file whose only other sign is a leaf layer's class line from being
/// indexed for nothing (most such layers run their op on their weight as
/// it is).
pub fn may_hand_a_layer_over(text: &str) -> bool {
    hands_a_layer_over(text, |_| true)
}

/// [`may_hand_a_layer_over`], for a `self` at a byte `within` accepts.
fn hands_a_layer_over(text: &str, within: impl Fn(usize) -> bool) -> bool {
    let bytes = text.as_bytes();
    // Bytes of a name (a non-ASCII letter's too).
    let is_name = |b: u8| b == b'_' || b.is_ascii_alphanumeric() || b >= 0x80;
    for at in memchr::memmem::find_iter(bytes, b"self").filter(|&at| within(at)) {
        // `(` and blanks or line breaks before it (`bring(\n    self.weight`).
        let Some(open) = bytes[..at].iter().rposition(|b| !b.is_ascii_whitespace()) else {
            continue;
        };
        if bytes[open] != b'(' || bytes.get(at.wrapping_sub(1)).is_some_and(|&b| is_name(b)) {
            continue;
        }
        // `self`, `self.weight`, `self.bias`, `self.data`, or another
        // attribute handed with a device (`bring(self.scale, x.device)`: a
        // parameter the class declares may have any name).
        let rest = &bytes[at + 4..];
        let after = match rest.strip_prefix(b".") {
            Some(attr) => {
                let len = attr.iter().take_while(|&&b| is_name(b)).count();
                let after = &attr[len..];
                let arguments = &after[..memchr::memchr(b')', after).unwrap_or(after.len())];
                (matches!(&attr[..len], b"weight" | b"bias" | b"data")
                    || (len > 0 && memchr::memmem::find(arguments, b"device").is_some()))
                .then_some(after)
            }
            None => (!rest.first().is_some_and(|&b| is_name(b))).then_some(rest),
        };
        let Some(after) = after else {
            continue;
        };
        if !matches!(after.trim_ascii_start().first(), Some(b',' | b')')) {
            continue;
        }
        let start = bytes[..open]
            .iter()
            .rposition(|&b| !is_name(b))
            .map_or(0, |i| i + 1);
        let callee = &bytes[start..open];
        if callee.is_empty()
            || callee.starts_with(b"__")
            || LOOKS_ONLY.iter().any(|l| l.as_bytes() == callee)
        {
            continue;
        }
        // A `def`'s or `class`'s own parameter list is no call.
        let before = bytes[..start].trim_ascii_end();
        let keyword = before
            .iter()
            .rposition(|&b| !is_name(b))
            .map_or(0, |i| i + 1);
        if matches!(&before[keyword..], b"def" | b"class") {
            continue;
        }
        return true;
    }
    false
}

/// Whether the text of a base list (from after its `(`) names a leaf layer
/// as the last part of a dotted name.
fn bases_name_a_leaf_layer(bases: &[u8]) -> bool {
    let is_name = |b: u8| b == b'_' || b.is_ascii_alphanumeric();
    let mut i = 0;
    while i < bases.len() {
        if bases[i] == b')' {
            return false;
        }
        if !is_name(bases[i]) {
            i += 1;
            continue;
        }
        let word_start = i;
        while i < bases.len() && is_name(bases[i]) {
            i += 1;
        }
        let word = &bases[word_start..i];
        let dotted_end = bases.get(i) != Some(&b'.');
        if dotted_end && names_a_leaf_word(word) {
            return true;
        }
    }
    false
}

/// Whether `word` is the last name of one of torch's leaf layers or of a
/// library's ([`TORCH_LEAF_LAYERS`], [`LIBRARY_LEAF_LAYERS`]).
fn names_a_leaf_word(word: &[u8]) -> bool {
    std::str::from_utf8(word).is_ok_and(|w| {
        TORCH_LEAF_LAYERS.contains(&w)
            || LIBRARY_LEAF_LAYERS
                .iter()
                .any(|l| l.rsplit('.').next() == Some(w))
    })
}

#[cfg(test)]
mod tests {
    use super::{may_subclass_a_leaf_layer, names_leaf_layer};

    #[test]
    fn leaf_layers_are_torch_s_weight_holding_layers() {
        assert!(names_leaf_layer("torch.nn.Linear"));
        assert!(names_leaf_layer("torch.nn.modules.linear.Linear"));
        assert!(names_leaf_layer("torch.nn.modules.conv.Conv2d"));
        assert!(names_leaf_layer("bitsandbytes.nn.Linear8bitLt"));
        assert!(!names_leaf_layer("torch.nn.Module"));
        assert!(!names_leaf_layer("torch.nn.Sequential"));
        assert!(!names_leaf_layer("torch.nn.functional.linear"));
        assert!(!names_leaf_layer("mylib.nn.Linear"));
    }

    #[test]
    fn a_layer_handed_to_a_function_is_read_without_parsing() {
        use super::may_hand_a_layer_over;
        assert!(may_hand_a_layer_over("        w, b = fetch(self, x)\n"));
        assert!(may_hand_a_layer_over(
            "    w = cast_to_device(self.weight, x.device)\n"
        ));
        assert!(may_hand_a_layer_over("    return mod.cast(self)\n"));
        assert!(!may_hand_a_layer_over(
            "    def forward(self, x):\n        return x\n"
        ));
        assert!(!may_hand_a_layer_over(
            "    if isinstance(self, A) or getattr(self, 'x'):\n"
        ));
        assert!(!may_hand_a_layer_over(
            "    super().__init__(self)\n    Base.__init__(self, n)\n"
        ));
        // Another attribute, handed with a device: a parameter the class
        // declares may have any name; an attribute of an attribute is no
        // layer's tensor.
        assert!(may_hand_a_layer_over(
            "    s = bring(self.scale, x.device)\n"
        ));
        assert!(!may_hand_a_layer_over("    s = norm(self.scale, x)\n"));
        assert!(!may_hand_a_layer_over(
            "    z = g(self.weight.T)\n    y = f(self.a.b, x.device)\n    w = h(self.)\n"
        ));
        assert!(may_hand_a_layer_over(
            "    w = bring(\n        self.weight, x.device\n    )\n"
        ));
        assert!(may_hand_a_layer_over(
            "    w = bring( self.weight, x.device)\n"
        ));
        assert!(may_hand_a_layer_over(
            "    def forward(self, x): return F.linear(x, bring(self.weight, x.device))\n"
        ));
        assert!(may_hand_a_layer_over("    w = holé(self.weight, d)\n"));
        assert!(!may_hand_a_layer_over(
            "    def forward( self ):\n    myself(x)\n"
        ));
    }

    #[test]
    fn only_a_leaf_layer_s_own_body_hands_it_over() {
        use super::may_define_a_transfer_layer;
        let layer =
            "class L(nn.Linear):\n    def forward(self, x):\n        return f(fetch(self, x))\n";
        assert!(may_define_a_transfer_layer(layer));
        let derived = "class B(nn.Embedding):\n    pass\n\nclass A(B, Mixin):\n    def forward(self, i):\n        w = to_device(\n            self.weight, i.device)\n";
        assert!(may_define_a_transfer_layer(derived));
        let elsewhere = "class Norm(nn.LayerNorm):\n    pass\n\n# a comment\nclass Attention(nn.Module):\n    def forward(self, x):\n        return attention_interface(\n            self,\n            x,\n        )\n";
        assert!(!may_define_a_transfer_layer(elsewhere));
    }

    #[test]
    fn a_class_line_naming_a_leaf_layer_among_its_bases_is_read_without_parsing() {
        assert!(may_subclass_a_leaf_layer(
            "class CustomLinear(torch.nn.Linear, Mixin):\n    pass\n"
        ));
        assert!(may_subclass_a_leaf_layer(
            "if x:\n    class C(nn.Conv2d): pass\n"
        ));
        assert!(may_subclass_a_leaf_layer("class Q(bnb.nn.Linear8bitLt):\n"));
        assert!(!may_subclass_a_leaf_layer(
            "class Block(nn.Module):\n    def f(self):\n        isinstance(m, nn.Linear)\n"
        ));
        assert!(!may_subclass_a_leaf_layer(
            "class LinearBlock(nn.Module):\n"
        ));
        assert!(!may_subclass_a_leaf_layer("class C(Base):  # nn.Linear\n"));
        assert!(!may_subclass_a_leaf_layer("classy = nn.Linear(3, 4)\n"));
        assert!(!may_subclass_a_leaf_layer(
            "class C(nn.Linear.something):\n"
        ));
    }

    #[test]
    fn a_leaf_layer_imported_under_another_name_names_one_too() {
        assert!(may_subclass_a_leaf_layer(
            "from lib.norms import RMSNorm as LibRMSNorm\n\nclass Custom(LibRMSNorm, Mixin):\n    pass\n"
        ));
        assert!(may_subclass_a_leaf_layer(
            "from torch.nn import (\n    Linear as Lin,\n)\nclass L(Lin): pass\n"
        ));
        assert!(!may_subclass_a_leaf_layer(
            "from lib import Block as LinearBlock\nclass C(LinearBlock): pass\n"
        ));
        assert!(!may_subclass_a_leaf_layer(
            "with open(p) as Linear:\n    pass\nclass C(Base): pass\n"
        ));
    }
}
