//! Unit tests of [`super`]: facts told from a module's text.
use super::*;

#[test]
fn a_class_swap_is_told_from_its_text() {
    let swaps = |text: &str| {
        let tree = crate::parse::parse(text).unwrap();
        let facts = ModuleFacts::build(
            Path::new("m.py"),
            tree.root_node(),
            text,
            &Vocabulary::default(),
            None,
        );
        facts.swapped_classes.len()
    };
    for (text, found) in [
        ("m.__class__ = Lazy\n", 1),
        ("setattr(m, '__class__', Lazy)\n", 1),
        // The swap, and the function its namespace holds.
        ("m.__class__ = type('L', (C,), {'__getattr__': f})\n", 2),
    ] {
        assert!(crate::analysis::prefilter::may_swap_class(text), "{text:?}");
        assert_eq!(swaps(text), found, "{text:?}");
    }
    for text in ["c = m.__class__\n", "if m.__class__ == C: ...\n"] {
        assert!(
            !crate::analysis::prefilter::may_swap_class(text),
            "{text:?}"
        );
        assert_eq!(swaps(text), 0, "{text:?}");
    }
}

#[test]
fn a_forward_replacement_is_told_from_its_text() {
    // The text test says yes wherever the index query finds one.
    let replacements = |text: &str| {
        let tree = crate::parse::parse(text).unwrap();
        let root = tree.root_node();
        ModuleFacts::build(Path::new("m.py"), root, text, &Vocabulary::default(), None)
            .forward_replacements
            .len()
    };
    for text in [
        "m.forward = wrapper\n",
        "module . forward=partial(f, m)\n",
        "m.__class__.forward: Callable = w\n",
        "m.\\\n    forward \\\n = w\n",
        "setattr(m, \"forward\", w)\n",
        "setattr(m, 'forward', w)\n",
    ] {
        assert!(
            crate::analysis::prefilter::may_replace_forward(text),
            "{text:?}"
        );
        assert_eq!(replacements(text), 1, "{text:?}");
    }
    for text in [
        "def forward(self, x): ...\n",
        "y = self.forward(x)\n",
        "if m.forward == f: ...\n",
        "m.forward_pre = w\n",
        "old = m.forward\n",
        "doc = \"the forward pass\"\n",
    ] {
        assert!(
            !crate::analysis::prefilter::may_replace_forward(text),
            "{text:?}"
        );
        assert_eq!(replacements(text), 0, "{text:?}");
    }
}
