//! Where a walk's blocks may or may not run, or stop part way: the arms and
//! partial blocks of [`Env`](super::env::Env), by statement.

use tree_sitter::Node;

use crate::analysis::effects::value::Vals;
use crate::syntax::Field;

impl<'t> super::Walker<'_, 't> {
    /// A block of a compound statement: it may or may not run (see
    /// [`Env::enter_arm`](super::env::Env::enter_arm)).
    pub(super) fn arm(&mut self, block: Node<'t>) {
        let arm = self.env.enter_arm();
        // A loop's body: what its previous iteration left (see `loops.rs`).
        for (name, vals) in self.loops.carry_in.take().into_iter().flatten() {
            self.env.carry(&name, vals);
        }
        self.block(block);
        self.env.leave_arm(arm);
    }

    /// Runs `walk` where, if `partial`, nothing is replaced (see
    /// [`Env::enter_partial`](super::env::Env::enter_partial)).
    pub(super) fn partially(&mut self, partial: bool, walk: impl FnOnce(&mut Self)) {
        if partial {
            self.env.enter_partial();
        }
        walk(self);
        if partial {
            self.env.leave_partial();
        }
    }

    /// Runs `walk` over the parts of `loop_statement` (a `for` or `while`
    /// statement), where nothing is replaced if its body can leave it part
    /// way (a `break` or `continue` of its own): the names as they were at
    /// the `break` or `continue` go on. Where its body reads a name before binding it, its
    /// body is walked first to learn what an iteration leaves there, with
    /// nothing recorded, and that is carried into the body (see `loops.rs`).
    pub(super) fn in_loop(&mut self, loop_statement: Node<'t>, walk: impl Fn(&mut Self)) {
        let (breaks, continues) = own_jumps(loop_statement);
        let partial = breaks || continues;
        if !self.loops.probing
            && !breaks
            && let Some(body) = loop_statement.field("body")
            && self.loops.spend(loop_statement)
        {
            let carried = super::loops::carried(loop_statement, self.text);
            if !carried.is_empty() && self.loops.spend(loop_statement) {
                let saved = self.saved();
                self.loops.probing = true;
                // One iteration: a `while`'s condition, then the body (not
                // the `else`, which runs after the last).
                self.partially(partial, |walker| {
                    if let Some(condition) = loop_statement.field("condition") {
                        walker.eval(condition);
                    }
                    walker.arm(body);
                });
                self.loops.probing = false;
                let at_end: Vec<(String, Vals)> = carried
                    .into_iter()
                    .filter_map(|name| {
                        let vals = self.env.get(&name)?;
                        Some((name, vals))
                    })
                    .collect();
                self.restore(saved);
                self.loops.carry_in = Some(at_end);
            }
        }
        self.partially(partial, walk);
        self.loops.carry_in = None;
    }

    /// What a walk of a loop's body changes, as it is before it.
    fn saved(&self) -> Saved {
        Saved {
            env: self.env.clone(),
            facts: self.facts.clone(),
            timing: self.timing,
            storage_held: self.storage_held.clone(),
            filled: self.filled.clone(),
            self_aliases: self.self_aliases.clone(),
            instances: self.instances.clone(),
        }
    }

    fn restore(&mut self, saved: Saved) {
        self.env = saved.env;
        self.facts = saved.facts;
        self.timing = saved.timing;
        self.storage_held = saved.storage_held;
        self.filled = saved.filled;
        self.self_aliases = saved.self_aliases;
        self.instances = saved.instances;
    }
}

/// The walk's state before a loop walked to learn what it leaves.
struct Saved {
    env: super::env::Env,
    facts: super::LocalFacts,
    timing: Option<Option<&'static str>>,
    storage_held: Vec<String>,
    filled: Vec<String>,
    self_aliases: Vec<(String, String)>,
    instances: Vec<String>,
}

/// Whether the body of `loop_statement` (a `for` or `while` statement)
/// holds a `break`, and a `continue`, of its own: not one of a loop, a
/// function or a class inside it.
fn own_jumps(loop_statement: Node<'_>) -> (bool, bool) {
    let (mut breaks, mut continues) = (false, false);
    let Some(body) = loop_statement.field("body") else {
        return (breaks, continues);
    };
    let mut pending = vec![body];
    while let Some(node) = pending.pop() {
        match node.kind() {
            "break_statement" => breaks = true,
            "continue_statement" => continues = true,
            "for_statement"
            | "while_statement"
            | "function_definition"
            | "class_definition"
            | "lambda" => continue,
            _ => {}
        }
        let mut cursor = node.walk();
        pending.extend(node.named_children(&mut cursor));
    }
    (breaks, continues)
}
