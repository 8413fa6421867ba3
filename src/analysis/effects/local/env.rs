//! What each local name holds during the walk of one function, in the order
//! the statements run.
//!
//! A plain assignment (`x = e`) replaces what `x` held on the way the
//! statements run in a straight line: after `pos = helper(); pos =
//! torch.from_numpy(pos).float()` the name holds the tensor made here, not
//! what `helper()` returned. Control flow joins: each compound statement's
//! block is an *arm* that may or may not run, so an assignment inside it
//! replaces only what the same arm bound before, and what the arm bound
//! joins what the name held before it once the arm ends (`x = a; if c: x =
//! b` leaves `x` holding `a` or `b`). A loop's body starts with what its
//! previous iteration left in the names it reads before binding them
//! ([`Env::carry`], see `loops.rs`).
//!
//! Nothing is replaced in a block that may stop part way and be left with
//! the names as they were at any statement ([`Env::enter_partial`]): a
//! `try` statement (an `except` block may start after any statement of the
//! body), a `with` statement's body (its context manager may swallow an
//! exception), a loop whose body holds a `break` or `continue` of its own.
//! Loop targets, `with ... as` names, comprehension variables and walrus
//! targets add to what a name holds, as before; a `def`, a `class` or an
//! import binds its name to that alone, as before.
//!
//! What every name was bound to, in the order bound (the first few kept,
//! see `Vals`), stays available for the function's exported locals
//! ([`Env::into_locals`]), which later questions read without knowing
//! where in the function they are asked: exactly what the walk kept before
//! it ran in order.

use std::collections::HashMap;

use crate::analysis::effects::value::Vals;

/// More bindings than this for one name (a name rebound in many arms):
/// they are folded into one, replaced only by a top-level assignment.
const MOST_SEGMENTS: usize = 8;

/// The arm of the function's own body.
const BODY: u32 = 0;

/// A local name's values, each part with the arm that bound it, in the
/// order bound.
#[derive(Debug, Default, Clone)]
struct Bound(Vec<(u32, Vals)>);

impl Bound {
    fn union(&self) -> Vals {
        let mut all = Vals::default();
        for (_, vals) in &self.0 {
            all.extend(vals.clone());
        }
        all
    }

    fn push(&mut self, arm: u32, vals: Vals) {
        match self.0.last_mut() {
            Some((last, held)) if *last == arm => held.extend(vals),
            _ => self.0.push((arm, vals)),
        }
        if self.0.len() > MOST_SEGMENTS {
            let all = self.union();
            self.0 = vec![(BODY, all)];
        }
    }
}

/// The local names of one function's walk (see the module's doc).
#[derive(Debug, Default, Clone)]
pub(super) struct Env {
    names: HashMap<String, Bound>,
    /// The arm the walk is in, and the last arm id given out.
    arm: u32,
    arms: u32,
    /// How many blocks that may stop part way the walk is inside.
    partial: u32,
    /// The names bound in the arms the walk is inside, each arm's from
    /// where it started: handed to the enclosing arm when one ends.
    trail: Vec<String>,
    /// Everything each name was bound to, for [`Env::into_locals`].
    ever: HashMap<String, Vals>,
}

/// Where an arm started (see [`Env::enter_arm`]).
pub(super) struct ArmStart {
    parent: u32,
    trail: usize,
}

impl Env {
    /// What `name` holds here, if it is bound in the function.
    pub(super) fn get(&self, name: &str) -> Option<Vals> {
        self.names.get(name).map(Bound::union)
    }

    pub(super) fn contains_key(&self, name: &str) -> bool {
        self.names.contains_key(name)
    }

    /// `name` now holds `vals` alone, wherever the walk is: a `def`, a
    /// `class` or an import, as the walk always took them (inside an `if`
    /// too, where the name may still hold what it held before).
    pub(super) fn set(&mut self, name: String, vals: Vals) {
        self.note_in_arm(&name);
        self.ever.insert(name.clone(), vals.clone());
        self.names.insert(name, Bound(vec![(self.arm, vals)]));
    }

    /// `name` holds `vals` too: a loop's target, a container filled.
    pub(super) fn add(&mut self, name: &str, vals: Vals) {
        self.note_in_arm(name);
        self.bind_in(self.arm, name, vals);
    }

    /// `name` holds `vals` too, bound in `arm`.
    fn bind_in(&mut self, arm: u32, name: &str, vals: Vals) {
        self.ever
            .entry(name.to_owned())
            .or_default()
            .extend(vals.clone());
        self.names
            .entry(name.to_owned())
            .or_default()
            .push(arm, vals);
    }

    /// Remembers that `name` was bound in the arm the walk is in, for the
    /// arm's end; the body's own bindings need no such note.
    fn note_in_arm(&mut self, name: &str) {
        if self.arm != BODY {
            self.trail.push(name.to_owned());
        }
    }

    /// `name` holds `vals` too in the arm the walk is in, brought there by
    /// a loop's next iteration: replaced by an assignment in that arm like
    /// what the arm bound, and not among what the name was ever bound to
    /// (the walk binds it where it was bound).
    pub(super) fn carry(&mut self, name: &str, vals: Vals) {
        self.note_in_arm(name);
        self.names
            .entry(name.to_owned())
            .or_default()
            .push(self.arm, vals);
    }

    /// `name` holds `vals` too, if it is bound here.
    pub(super) fn fill(&mut self, name: &str, vals: Vals) {
        if self.names.contains_key(name) {
            self.add(name, vals);
        }
    }

    /// What `name` held on entry (a parameter), kept as the body's: an
    /// assignment in an arm does not replace it.
    pub(super) fn seed(&mut self, name: &str, vals: Vals) {
        self.bind_in(BODY, name, vals);
    }

    /// A plain assignment: `name` holds `vals`, replacing what this arm
    /// bound it to before (nothing in a block that may stop part way).
    pub(super) fn assign(&mut self, name: &str, vals: Vals) {
        if self.partial == 0
            && let Some(bound) = self.names.get_mut(name)
        {
            let arm = self.arm;
            bound.0.retain(|(at, _)| *at != arm);
        }
        self.add(name, vals);
    }

    /// Enters a block that may or may not run.
    pub(super) fn enter_arm(&mut self) -> ArmStart {
        let start = ArmStart {
            parent: self.arm,
            trail: self.trail.len(),
        };
        self.arms += 1;
        self.arm = self.arms;
        start
    }

    /// Leaves the arm `start` began: what it bound joins what the names
    /// held before it, as the enclosing arm's.
    pub(super) fn leave_arm(&mut self, start: ArmStart) {
        let arm = self.arm;
        for name in &self.trail[start.trail..] {
            if let Some(bound) = self.names.get_mut(name) {
                for (at, _) in &mut bound.0 {
                    if *at == arm {
                        *at = start.parent;
                    }
                }
            }
        }
        self.arm = start.parent;
        if start.parent == BODY {
            self.trail.clear();
        }
    }

    /// Enters a block that may stop part way and be left with the names
    /// as they were at any of its statements (see the module's doc): no
    /// assignment in it replaces anything.
    pub(super) fn enter_partial(&mut self) {
        self.partial += 1;
    }

    pub(super) fn leave_partial(&mut self) {
        self.partial -= 1;
    }

    /// Every name with everything it was bound to, in the order bound, by
    /// name.
    pub(super) fn into_locals(self) -> Vec<(String, Vals)> {
        let mut locals: Vec<(String, Vals)> = self.ever.into_iter().collect();
        locals.sort_by(|a, b| a.0.cmp(&b.0));
        locals
    }
}

#[cfg(test)]
mod tests {
    use super::Env;
    use crate::analysis::effects::value::{Root, Shape, Val, Vals};

    fn named(name: &str) -> Vals {
        Vals::one(Val::new(Root::Global(name.into()), Shape::Object))
    }

    fn held(env: &Env, name: &str) -> Vec<String> {
        env.get(name)
            .unwrap_or_default()
            .iter()
            .map(|v| match &v.root {
                Root::Global(g) => g.to_string(),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn an_assignment_replaces_what_the_same_straight_line_bound() {
        let mut env = Env::default();
        env.assign("x", named("a"));
        env.assign("x", named("b"));
        assert_eq!(held(&env, "x"), ["b"]);
        // The exported locals keep both.
        let locals = env.into_locals();
        assert_eq!(locals.len(), 1);
        assert_eq!(locals[0].1.0.len(), 2);
    }

    #[test]
    fn an_arm_joins_what_the_name_held_before_it() {
        let mut env = Env::default();
        env.assign("x", named("a"));
        let arm = env.enter_arm();
        env.assign("x", named("b"));
        env.assign("x", named("c"));
        assert_eq!(held(&env, "x"), ["a", "c"]);
        env.leave_arm(arm);
        assert_eq!(held(&env, "x"), ["a", "c"]);
        // After the arm, a top-level assignment replaces both.
        env.assign("x", named("d"));
        assert_eq!(held(&env, "x"), ["d"]);
    }

    #[test]
    fn nothing_is_replaced_inside_a_try_and_a_parameter_survives_an_arm() {
        let mut env = Env::default();
        env.enter_partial();
        env.assign("x", named("a"));
        env.assign("x", named("b"));
        env.leave_partial();
        assert_eq!(held(&env, "x"), ["a", "b"]);
        let arm = env.enter_arm();
        env.seed("p", named("param"));
        env.assign("p", named("new"));
        env.leave_arm(arm);
        assert_eq!(held(&env, "p"), ["param", "new"]);
    }

    #[test]
    fn exported_locals_keep_the_first_values_bound_in_order() {
        let mut env = Env::default();
        env.assign("x", named("a"));
        let arm = env.enter_arm();
        env.assign("x", named("b"));
        env.assign("x", named("c"));
        env.leave_arm(arm);
        env.assign("x", named("d"));
        env.assign("x", named("e"));
        let locals = env.into_locals();
        let held: Vec<String> = locals[0]
            .1
            .iter()
            .map(|v| format!("{:?}", v.root))
            .collect();
        assert_eq!(held.len(), 4);
        assert!(held[0].contains('a') && held[3].contains('d'), "{held:?}");
    }

    #[test]
    fn many_arms_fold_into_one_binding() {
        let mut env = Env::default();
        for i in 0..100 {
            let arm = env.enter_arm();
            env.assign("x", named(&format!("v{i}")));
            env.leave_arm(arm);
        }
        // At most four values are kept, the first ones (see `Vals`).
        assert_eq!(held(&env, "x"), ["v0", "v1", "v2", "v3"]);
        env.assign("x", named("last"));
        assert_eq!(held(&env, "x"), ["last"]);
    }
}
