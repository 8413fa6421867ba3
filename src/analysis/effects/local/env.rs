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
//! b` leaves `x` holding `a` or `b`). The walk is one pass: a value bound
//! late in a loop's body is not seen by its earlier statements on the next
//! iteration, as before. Inside a `try` statement nothing is replaced (an
//! `except` block may start after any statement of the body); loop
//! targets, `with ... as` names and comprehension variables add to what a
//! name holds, as before.
//!
//! What every name was ever bound to stays available for the function's
//! exported locals ([`Env::into_locals`]), which later questions read
//! without knowing where in the function they are asked.

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
#[derive(Debug, Default)]
pub(super) struct Env {
    names: HashMap<String, Bound>,
    /// The arm the walk is in, and the last arm id given out.
    arm: u32,
    arms: u32,
    /// How many `try` statements the walk is inside.
    in_try: u32,
    /// The names bound in the arms the walk is inside, each arm's from
    /// where it started: handed to the enclosing arm when one ends.
    trail: Vec<String>,
    /// What assignments replaced, for [`Env::into_locals`].
    replaced: HashMap<String, Vals>,
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

    /// `name` now holds `vals` alone, wherever the walk is (a `def`, a
    /// `class` or an import binds a name to one thing).
    pub(super) fn set(&mut self, name: String, vals: Vals) {
        self.trail.push(name.clone());
        self.names.insert(name, Bound(vec![(self.arm, vals)]));
    }

    /// `name` holds `vals` too: a loop's target, a container filled.
    pub(super) fn add(&mut self, name: &str, vals: Vals) {
        self.trail.push(name.to_owned());
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
        self.names
            .entry(name.to_owned())
            .or_default()
            .push(BODY, vals);
    }

    /// A plain assignment: `name` holds `vals`, replacing what this arm
    /// bound it to before (nothing inside a `try`).
    pub(super) fn assign(&mut self, name: &str, vals: Vals) {
        if self.in_try == 0
            && let Some(bound) = self.names.get_mut(name)
        {
            let arm = self.arm;
            let replaced = self.replaced.entry(name.to_owned()).or_default();
            bound.0.retain(|(at, held)| {
                let keep = *at != arm;
                if !keep {
                    replaced.extend(held.clone());
                }
                keep
            });
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

    pub(super) fn enter_try(&mut self) {
        self.in_try += 1;
    }

    pub(super) fn leave_try(&mut self) {
        self.in_try = self.in_try.saturating_sub(1);
    }

    /// Every name with everything it was ever bound to (what assignments
    /// replaced first), by name.
    pub(super) fn into_locals(mut self) -> Vec<(String, Vals)> {
        let mut locals: Vec<(String, Vals)> = self
            .names
            .into_iter()
            .map(|(name, bound)| {
                let mut all = self.replaced.remove(&name).unwrap_or_default();
                all.extend(bound.union());
                (name, all)
            })
            .collect();
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
        env.enter_try();
        env.assign("x", named("a"));
        env.assign("x", named("b"));
        env.leave_try();
        assert_eq!(held(&env, "x"), ["a", "b"]);
        let arm = env.enter_arm();
        env.seed("p", named("param"));
        env.assign("p", named("new"));
        env.leave_arm(arm);
        assert_eq!(held(&env, "p"), ["param", "new"]);
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
