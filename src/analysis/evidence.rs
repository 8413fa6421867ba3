//! Offload evidence in one function's own body: the signs
//! `queries/offload_evidence.scm` finds, each judged as offload work or
//! discounted with a reason a user can check.
//!
//! A move or cast is offload work when it moves **module state** (the hook's
//! module or an attribute of it or of the hook object, parameters, buffers,
//! `.data`, tensors taken from `parameters()` / `state_dict()` ...), or moves
//! a value the hook passes on to a **device**. It is not when it only casts an
//! activation to a dtype, copies an activation aside (to hash, log or keep
//! it), or calls `synchronize()` to time the forward.

use serde::Serialize;
use tree_sitter::Node;

use crate::analysis::arguments::{
    Argument, activation_argument, activation_device, argument_kind, copied_aside, is_hook_value,
    is_module_state, passes_on, reads_memory_stats, times_itself,
};
use crate::queries::QUERIES;
use crate::syntax::{root_name, text_of};

/// One sign found in a function's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Sign {
    /// `move`, `transfer`, `stream`, `onload`, `params`, `prefetch`,
    /// `storage`, `rng`, `non_blocking`, `data` or `delegate`.
    pub kind: &'static str,
    /// What it does, in words: `moves module state via .to(...)`.
    pub detail: String,
    /// 1-based line of the sign.
    pub line: usize,
    /// Why it does not count as offload work, when it does not.
    pub discounted: Option<String>,
}

impl Sign {
    pub fn counts(&self) -> bool {
        self.discounted.is_none()
    }
}

/// Every sign in a file, each with the start byte of the innermost `def` or
/// `lambda` it stands in (`None` at module or class level), in text order.
pub fn signs_in_file(root: Node<'_>, text: &str) -> Vec<(Option<usize>, Sign)> {
    signs_in_file_with(root, text, &crate::syntax::Enclosing::functions_under(root))
}

/// [`signs_in_file`], with every function of the tree at `root` given.
pub fn signs_in_file_with(
    root: Node<'_>,
    text: &str,
    functions: &crate::syntax::Enclosing<'_>,
) -> Vec<(Option<usize>, Sign)> {
    let q = &QUERIES.offload_evidence;
    let names = q.compiled.query.capture_names();
    let mut found: Vec<(usize, Option<usize>, Sign)> = Vec::new();
    crate::syntax::each_match(&q.compiled.query, root, text, |_, captures| {
        let call = crate::syntax::capture(captures, q.call);
        for c in captures {
            let name = names[c.index as usize];
            let Some(kind) = name.strip_prefix("evidence.") else {
                continue;
            };
            if matches!(kind, "call" | "storage_of") {
                continue;
            }
            let owner = functions.around(c.node);
            let detail = text_of(c.node, text);
            let sign = judge(kind, detail, c.node, call, owner, text);
            let Some(sign) = sign else { continue };
            found.push((c.node.start_byte(), owner.map(|o| o.start_byte()), sign));
        }
    });
    found.sort_by_key(|(at, _, _)| *at);
    found.dedup_by_key(|(at, _, _)| *at);
    found
        .into_iter()
        .map(|(_, owner, sign)| (owner, sign))
        .collect()
}

/// Every sign in the body of `function` (a `def` or `lambda`), nested
/// functions excluded.
pub fn signs_in_function(function: Node<'_>, text: &str) -> Vec<Sign> {
    let Some(body) = function.child_by_field_name("body") else {
        return Vec::new();
    };
    signs_in_file_with(
        body,
        text,
        &crate::syntax::Enclosing::functions_under(function),
    )
    .into_iter()
    .filter(|(owner, _)| owner.is_none() || *owner == Some(function.start_byte()))
    .map(|(_, sign)| sign)
    .collect()
}

fn judge(
    kind: &'static str,
    detail: &str,
    node: Node<'_>,
    call: Option<Node<'_>>,
    owner: Option<Node<'_>>,
    text: &str,
) -> Option<Sign> {
    let line = node.start_position().row + 1;
    let sign = |detail: String, discounted: Option<String>| Sign {
        kind,
        detail,
        line,
        discounted,
    };
    Some(match kind {
        "move" => {
            let call = call?;
            let (detail, discounted) = judge_move(detail, call, owner, text);
            sign(detail, discounted)
        }
        "transfer" => sign(format!("moves tensors via {detail}(...)"), None),
        "stream" if detail == "synchronize" => {
            let timing = owner.is_some_and(|f| times_itself(f, text));
            let measuring = !timing && owner.is_some_and(|f| reads_memory_stats(f, text));
            sign(
                "synchronizes the device via .synchronize()".to_owned(),
                if timing {
                    Some(
                        "synchronize() stands next to timing calls: it times the forward"
                            .to_owned(),
                    )
                } else if measuring {
                    Some(
                        "synchronize() stands next to memory statistics calls: it measures memory"
                            .to_owned(),
                    )
                } else {
                    None
                },
            )
        }
        "stream" => {
            // An event waited on next to `elapsed_time()`: a timer's, not offload.
            let timing = owner.is_some_and(|f| times_itself(f, text));
            sign(
                format!("waits on or records streams via .{detail}(...)"),
                timing.then(|| {
                    format!("{detail}() stands next to timing calls: it times the forward")
                }),
            )
        }
        "onload" => sign(format!("on/offloads via {detail}(...)"), None),
        "params" => {
            let activation = call.and_then(|c| activation_argument(c, owner, text));
            sign(
                format!("gathers, fetches or releases parameters via {detail}(...)"),
                activation.map(|a| {
                    format!("`{a}` is an activation: {detail}(...) of it is a collective on activations, not parameter movement")
                }),
            )
        }
        "prefetch" => sign(format!("prefetches weights via {detail}(...)"), None),
        "storage" => sign(
            "resizes parameter storage via .untyped_storage().resize_(...)".to_owned(),
            None,
        ),
        "rng" => sign(
            format!("saves or restores RNG state via {detail}(...)"),
            None,
        ),
        "non_blocking" => {
            // Inside a `.to(...)`, the move speaks for it.
            let in_move = node
                .parent()
                .and_then(|kw| kw.parent())
                .and_then(|args| args.parent())
                .and_then(|c| c.child_by_field_name("function"))
                .and_then(|f| f.child_by_field_name("attribute"))
                .is_some_and(|a| matches!(text_of(a, text), "to" | "cuda" | "cpu"));
            if in_move {
                return None;
            }
            sign("copies with non_blocking=".to_owned(), None)
        }
        "data" => sign("assigns to .data".to_owned(), None),
        "delegate" => sign(format!("delegates to other hooks' {detail}"), None),
        _ => return None,
    })
}

/// What a `.to(...)` / `.cuda(...)` / `.cpu(...)` call does: its description
/// and, when it is no offload work, why.
fn judge_move(
    method: &str,
    call: Node<'_>,
    owner: Option<Node<'_>>,
    text: &str,
) -> (String, Option<String>) {
    let receiver = call
        .child_by_field_name("function")
        .and_then(|f| f.child_by_field_name("object"));
    let mut device = matches!(method, "cuda" | "cpu");
    let mut dtype = false;
    let mut unknown = false;
    if let Some(arguments) = call.child_by_field_name("arguments") {
        let mut cursor = arguments.walk();
        for argument in arguments.named_children(&mut cursor) {
            match argument_kind(argument, text) {
                Argument::Device => device = true,
                Argument::Dtype => dtype = true,
                Argument::Unknown => unknown = true,
                Argument::Neither => {}
            }
        }
    }
    let via = format!(".{method}(...)");
    let state = receiver.is_some_and(|r| is_module_state(r, owner, text));
    if state {
        let what = if device {
            "moves module state"
        } else if dtype {
            "casts module state"
        } else {
            "moves or casts module state"
        };
        return (format!("{what} via {via}"), None);
    }
    let name = receiver.map_or("a tensor".to_owned(), |r| {
        crate::syntax::short(text_of(r, text))
    });
    if let Some(aside) = copied_aside(call, text) {
        return (
            format!("copies `{name}` via {via}"),
            Some(format!(
                "`{name}` is an activation copied aside to {aside}, not module state"
            )),
        );
    }
    if dtype && !device {
        return (
            format!("casts `{name}` via {via}"),
            Some(format!(
                "`{name}` is cast to a dtype, not moved: an activation cast, not module state"
            )),
        );
    }
    // Only the hook's own inputs or outputs (its parameters, or items taken
    // from them) passed on count: a tensor it makes and returns is no
    // weight on its way to a device.
    let hook_value = owner.is_some_and(|f| {
        receiver
            .and_then(|r| root_name(r, text))
            .is_some_and(|root| is_hook_value(f, root, text))
    });
    let passed_on = hook_value && owner.is_some_and(|f| passes_on(call, f, text));
    if (device || unknown)
        && passed_on
        && let Some(follows) = call
            .child_by_field_name("arguments")
            .and_then(|a| activation_device(a, owner, text))
    {
        return (
            format!("moves `{name}`, which it passes on, via {via}"),
            Some(format!(
                "`{name}` follows another activation's device (`{follows}`): no weight moves"
            )),
        );
    }
    if (device || unknown) && passed_on {
        return (
            format!("moves `{name}`, which it passes on, to a device via {via}"),
            None,
        );
    }
    (
        format!("moves `{name}` via {via}"),
        Some(format!(
            "`{name}` is not module state and the moved value is not passed on"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signs(source: &str) -> Vec<Sign> {
        let tree = crate::parse::parse(source).unwrap();
        let root = tree.root_node();
        let function = root.named_child(0).unwrap();
        signs_in_function(function, source)
    }

    fn counted(source: &str) -> Vec<String> {
        signs(source)
            .into_iter()
            .filter(Sign::counts)
            .map(|s| s.detail)
            .collect()
    }

    #[test]
    fn module_state_moves_count() {
        assert_eq!(
            counted("def h(module, args):\n    module.to('cuda')\n"),
            ["moves module state via .to(...)"]
        );
        assert_eq!(
            counted(
                "def h(m, args):\n    for p in m.parameters():\n        p.data = p.data.to(dev)\n"
            ),
            [
                "assigns to .data",
                "moves or casts module state via .to(...)"
            ]
        );
        assert_eq!(
            counted("def pre(self, mod):\n    self.blocks[0].cpu()\n"),
            ["moves module state via .cpu(...)"]
        );
    }

    #[test]
    fn an_activation_following_another_activations_device_is_discounted() {
        let discounted = |source: &str| -> Vec<String> {
            signs(source)
                .into_iter()
                .filter_map(|s| s.discounted)
                .collect()
        };
        for source in [
            "def h(m, args, out):\n    return out.to(args[0].device)\n",
            "def h(m, args, out):\n    return out.to(device=args[0].device)\n",
            "def h(m, x, y):\n    return y.to(x)\n",
            "def h(m, x, y):\n    return y.to(x.device, non_blocking=True)\n",
        ] {
            assert_eq!(counted(source), Vec::<String>::new(), "{source}");
            let why = discounted(source);
            assert!(
                why.len() == 1 && why[0].contains("follows another activation's device"),
                "{source}: {why:?}"
            );
        }
        // From configuration, module state, a literal or a named device: counts.
        for source in [
            "def h(m, args, out):\n    return out.to(m.weight.device)\n",
            "def pre(self, m, args):\n    return tuple(a.to(self.execution_device) for a in args)\n",
            "def h(m, args, out):\n    return out.to('cuda')\n",
            "def h(m, x, device):\n    return x.to(device)\n",
            "def h(m, x, y):\n    return x.to('cpu', y.dtype)\n",
        ] {
            assert_eq!(counted(source).len(), 1, "{source}: {:?}", signs(source));
        }
    }

    #[test]
    fn synchronize_next_to_memory_statistics_is_discounted() {
        let profiler = "def h(m, args, out):\n    torch.cuda.synchronize()\n    \
                        m.peak = torch.cuda.max_memory_allocated()\n";
        let sync = signs(profiler);
        assert_eq!(sync.len(), 1, "{sync:?}");
        assert!(
            sync[0]
                .discounted
                .as_deref()
                .is_some_and(|d| d.contains("memory statistics")),
            "{sync:?}"
        );
        // Without them, a sync counts.
        assert_eq!(
            counted("def h(m, args, out):\n    torch.cuda.synchronize()\n"),
            ["synchronizes the device via .synchronize()"]
        );
    }

    #[test]
    fn activation_casts_and_copies_are_discounted() {
        for source in [
            "def h(m, args, out):\n    return out.to(out.dtype)\n",
            "def h(m, args, out):\n    states = out.to(torch.float32)\n    return states\n",
            "def h(m, args, out):\n    key = hash(out.cpu())\n",
            "def h(m, args, out):\n    self.seen.append(out.cpu())\n",
            "def h(m, args, out):\n    arr = out.cpu().numpy()\n",
            "def h(self, model, input, output):\n    self.svd.fit(states.to(torch.float32))\n",
            "def h(m, args, out):\n    hidden_states.to(torch.bfloat16)\n",
            "def make(self, batch):\n    return torch.full((batch, 2), 0.5).to(self.device)\n",
        ] {
            let found = signs(source);
            assert_eq!(found.len(), 1, "{source}");
            assert!(found[0].discounted.is_some(), "{source}: {found:?}");
        }
    }

    #[test]
    fn values_passed_on_to_a_device_count() {
        assert_eq!(
            counted("def h(m, args, out):\n    return out.to('cpu', non_blocking=True)\n"),
            ["moves `out`, which it passes on, to a device via .to(...)"]
        );
        assert_eq!(
            counted("def h(m, args):\n    args = tuple(a.cuda() for a in args)\n    return args\n"),
            ["moves `a`, which it passes on, to a device via .cuda(...)"]
        );
    }

    #[test]
    fn timing_synchronize_is_discounted_and_plain_synchronize_counts() {
        let timed =
            signs("def h(m, args):\n    torch.cuda.synchronize()\n    m.__start__ = time.time()\n");
        assert_eq!(timed.len(), 1);
        assert!(timed[0].discounted.as_deref().unwrap().contains("timing"));
        assert_eq!(
            counted("def h(m, args):\n    torch.cuda.synchronize()\n"),
            ["synchronizes the device via .synchronize()"]
        );
        // A timer's event wait is timing too.
        let timer = signs(
            "def get_elapsed(self):\n    stream.wait_event(self.end)\n    return self.start.elapsed_time(self.end)\n",
        );
        assert_eq!(timer.len(), 1);
        assert!(timer[0].discounted.is_some(), "{timer:?}");
    }

    #[test]
    fn parameter_movement_vocabulary_counts() {
        for (source, kind) in [
            ("def h(m):\n    coordinator.fetch_sub_module(m)\n", "params"),
            ("def h(m):\n    self._unshard(m)\n", "params"),
            ("def h(m):\n    p.untyped_storage().resize_(0)\n", "storage"),
            ("def h(m):\n    stream.wait_stream(other)\n", "stream"),
            ("def h(m):\n    self.prefetch_next(m)\n", "prefetch"),
            ("def h(m):\n    state = torch.cuda.get_rng_state()\n", "rng"),
        ] {
            let found = signs(source);
            assert_eq!(
                found.iter().map(|s| s.kind).collect::<Vec<_>>(),
                [kind],
                "{source}"
            );
            assert!(found[0].counts(), "{source}");
        }
        // Collectives on activations are not parameter movement.
        assert!(signs("def h(m, a, out):\n    return all_gather(out)\n").is_empty());
        assert!(signs("def h(m, a, out):\n    return unshard_anything(out, mesh)\n").is_empty());
        let unsharded =
            signs("def h(m, a, output):\n    return Sharder.unshard(output[0], 1, mesh)\n");
        assert_eq!(unsharded.len(), 1);
        assert!(
            unsharded[0]
                .discounted
                .as_deref()
                .unwrap()
                .contains("activation")
        );
        assert!(signs("def h(self, m, a):\n    self.handle.unshard()\n")[0].counts());
    }

    #[test]
    fn nested_functions_keep_their_own_signs() {
        let source =
            "def outer(m):\n    def inner(mod, args):\n        mod.to('cuda')\n    return inner\n";
        assert!(signs(source).is_empty());
    }
}
