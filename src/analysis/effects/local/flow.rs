//! Where a walk's blocks may or may not run, or stop part way: the arms and
//! partial blocks of [`Env`](super::env::Env), by statement.

use tree_sitter::Node;

use crate::syntax::Field;

impl<'t> super::Walker<'_, 't> {
    /// A block of a compound statement: it may or may not run (see
    /// [`Env::enter_arm`](super::env::Env::enter_arm)).
    pub(super) fn arm(&mut self, block: Node<'t>) {
        let arm = self.env.enter_arm();
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
    /// way ([`leaves_its_loop`]): the names as they were at the `break` or
    /// `continue` go on.
    pub(super) fn in_loop(&mut self, loop_statement: Node<'t>, walk: impl FnOnce(&mut Self)) {
        self.partially(leaves_its_loop(loop_statement), walk);
    }
}

/// Whether the body of `loop` (a `for` or `while` statement) holds a
/// `break` or `continue` of its own: not one of a loop, a function or a
/// class inside it.
fn leaves_its_loop(loop_statement: Node<'_>) -> bool {
    let Some(body) = loop_statement.field("body") else {
        return false;
    };
    let mut pending = vec![body];
    while let Some(node) = pending.pop() {
        match node.kind() {
            "break_statement" | "continue_statement" => return true,
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
    false
}
