//! Unit tests of [`super`]: facts told from a module's text.
use super::*;

/// The facts of `text` as the module `m.py`.
pub(crate) fn facts_of(text: &str) -> ModuleFacts {
    let tree = crate::parse::parse(text).unwrap();
    ModuleFacts::build(
        Path::new("m.py"),
        tree.root_node(),
        text,
        &Vocabulary::default(),
        None,
        None,
        &crate::analysis::listings::Listings::default(),
    )
}

#[test]
fn a_class_swap_is_told_from_its_text() {
    let swaps = |text: &str| facts_of(text).swapped_classes.len();
    for (text, found) in [
        ("m.__class__ = Lazy\n", 1),
        ("setattr(m, '__class__', Lazy)\n", 1),
        // The swap, and the function its namespace holds.
        ("m.__class__ = type('L', (C,), {'__getattr__': f})\n", 2),
    ] {
        assert!(crate::analysis::prefilter::may_swap_class(text), "{text:?}");
        assert_eq!(swaps(text), found, "{text:?}");
    }
    for text in [
        "c = m.__class__\n",
        "if m.__class__ == C: ...\n",
        // A string the index's query cannot take for a swap.
        "SLOT = \"__class__\"\n",
    ] {
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
    let replacements = |text: &str| facts_of(text).forward_replacements.len();
    for text in [
        "m.forward = wrapper\n",
        "module . forward=partial(f, m)\n",
        "m.__class__.forward: Callable = w\n",
        "m.\\\n    forward \\\n = w\n",
        "setattr(m, \"forward\", w)\n",
        "setattr(m, 'forward', w)\n",
        // A name that holds "forward": a loop over literal names, a
        // parameter a call passes it (as written, or from such a loop).
        "for name in ('encode', 'forward'):\n    setattr(m, name, w)\n",
        "for name in [\"forward\"]:\n    setattr(m, name, w)\n",
        "def patch(m, name):\n    setattr(m, name, w)\npatch(m, \"forward\")\n",
        "def patch(m, name):\n    setattr(m, name, w)\npatch(m, name=\"forward\")\n",
        "def patch(name):\n    setattr(m, name, w)\nfor n in ('forward', 'decode'):\n    patch(n)\n",
        "class P:\n    def patch(self, m, name):\n        setattr(m, name, w)\n    def go(self, m):\n        self.patch(m, 'forward')\n",
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
        // A whole string that is no argument of `setattr`: in a comment,
        // a constant, a dict key.
        "# runs before the \"forward\" pass\n",
        "HOOK_KIND = \"forward\"\n",
        "x = {\"forward\": 1}\n",
        "getattr(m, \"forward\")\n",
    ] {
        assert!(
            !crate::analysis::prefilter::may_replace_forward(text),
            "{text:?}"
        );
        assert_eq!(replacements(text), 0, "{text:?}");
    }
}

#[test]
fn a_named_setattr_replaces_the_forward_only_where_its_name_holds_forward() {
    // The prefilter may say yes (a "forward" string and `setattr` in the
    // file); the index finds no replacement, as the name never holds it.
    let replacements = |text: &str| facts_of(text).forward_replacements.len();
    for text in [
        "for name in ('encode', 'decode'):\n    setattr(m, name, w)\n",
        "for name in dir(m):\n    setattr(m, name, w)\nkind = ('forward',)\n",
        "def patch(m, name):\n    setattr(m, name, w)\npatch(m, 'decode')\nkinds = ['forward']\n",
        "def patch(m, name):\n    setattr(m, name, w)\nfor n in names:\n    patch(m, n)\n",
        "def patch(m, name):\n    setattr(m, name, w)\npatch(m, *args)\nx = ('forward',)\n",
        "def patch(m, name):\n    setattr(m, name, w)\nother(m, 'forward')\n",
    ] {
        assert_eq!(replacements(text), 0, "{text:?}");
    }
}

#[test]
fn the_instance_around_a_closure_is_the_nearest_methods_in_any_order_of_asking() {
    let text = "\
class A:
    def m(self):
        def f():
            g = lambda: lambda: self
            def h(): pass
        return f
    @staticmethod
    def s(x):
        def k(): pass
        return k
    def q(this):
        class B:
            def r(me):
                return lambda: me
        return lambda: this
def top():
    return lambda: 1
";
    let facts = facts_of(text);
    let functions = &facts.functions;
    let by_start: HashMap<usize, usize> = functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.start, i))
        .collect();
    // The walk out, one scope at a time, as the answer is defined.
    let walked = |i: usize| {
        let mut scope = functions[i].outer;
        while let Some(o) = scope.and_then(|start| by_start.get(&start).copied()) {
            let around = &functions[o];
            if around.is_method && !around.static_method {
                return around.parameters.first().cloned();
            }
            scope = around.outer;
        }
        None
    };
    let expected: Vec<Option<String>> = (0..functions.len()).map(walked).collect();
    let named = |name: &str, line: usize| {
        functions
            .iter()
            .position(|f| f.name == name && f.line == line)
            .unwrap()
    };
    assert_eq!(expected[named("<lambda>", 4)], Some("self".into()));
    assert_eq!(expected[named("h", 5)], Some("self".into()));
    assert_eq!(
        expected[named("k", 9)],
        None,
        "a static method has no instance"
    );
    assert_eq!(expected[named("<lambda>", 14)], Some("me".into()));
    assert_eq!(expected[named("<lambda>", 15)], Some("this".into()));
    assert_eq!(expected[named("<lambda>", 17)], None);
    // Deepest first, outermost first and interleaved: the memo answers the
    // same as the walk whatever was asked before.
    let n = functions.len();
    let orders: [Vec<usize>; 3] = [
        (0..n).rev().collect(),
        (0..n).collect(),
        (0..n).step_by(2).chain((1..n).step_by(2)).collect(),
    ];
    for order in orders {
        let mut instances = vec![None; n];
        for i in order {
            assert_eq!(
                instance_around(&mut instances, i, functions, &by_start),
                expected[i],
                "{}:{}",
                functions[i].name,
                functions[i].line
            );
        }
    }
}
