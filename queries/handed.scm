; Functions handed to something that calls them on the module's behalf, now
; or at backward time, for the project index: a call edge from the function
; that hands them over, so that offload work done there is evidence for it.
; A forward hook that sets up backward-time offload this way is traced by
; dynamo on every layer like any other (DeepSpeed 0.16.6 fenced
; `_post_backward_module_hook` next to `_pre_forward_module_hook`).
;
; Handed over: to a tensor hook (`t.register_hook(f)`,
; `register_post_accumulate_grad_hook(f)`,
; `torch.autograd.graph.register_multi_grad_hook(tensors, f)`), to the
; autograd engine (`Variable._execution_engine.queue_callback(f)`), to a
; custom autograd Function (`Fn.apply(module, f, *inputs)`) or to
; `nn.Module.apply(f)`; by name, or as the first argument of
; `functools.partial(f, ...)`; to an executor's `submit(f, *args)`.
;
; Captures:
;   @handed.call   the call that hands it over
;   @handed.to     the callee's name there (`register_hook`), for the predicate
;   @handed.callee the callee as written (`t.register_hook`)
;   @handed.fn     the function handed over (a bare name)
(call
  function: [
    (identifier) @handed.to
    (attribute attribute: (identifier) @handed.to)
  ] @handed.callee
  arguments: (argument_list (identifier) @handed.fn)
  (#any-of? @handed.to
    "register_hook" "register_post_accumulate_grad_hook"
    "register_multi_grad_hook" "queue_callback" "apply")) @handed.call

(call
  function: [
    (identifier) @handed.to
    (attribute attribute: (identifier) @handed.to)
  ] @handed.callee
  arguments: (argument_list
    (call
      function: [
        (identifier) @handed.partial
        (attribute attribute: (identifier) @handed.partial)
      ]
      arguments: (argument_list . (identifier) @handed.fn)))
  (#any-of? @handed.to
    "register_hook" "register_post_accumulate_grad_hook"
    "register_multi_grad_hook" "queue_callback" "apply")
  (#eq? @handed.partial "partial")) @handed.call

; Handed to an executor: `pool.submit(f, a, b)` runs `f(a, b)` (on another
; thread, on the module's behalf: a block swap's weight moves); only the
; first argument is the function.
(call
  function: (attribute attribute: (identifier) @handed.to) @handed.callee
  arguments: (argument_list . (identifier) @handed.fn)
  (#eq? @handed.to "submit")) @handed.call

; `Fn.apply(...)`: a custom autograd Function runs `Fn.forward` now and
; `Fn.backward` at backward time (followed only where `Fn` is a class).
;   @handed.applying  the call
;   @handed.class     `Fn`
(call
  function: (attribute
    object: (identifier) @handed.class
    attribute: (identifier) @handed.apply)
  (#eq? @handed.apply "apply")) @handed.applying

; Registered hooks replayed by hand: a fused module's pre-hook runs the hooks
; registered on the submodules it replaced,
; `for hook in sub._forward_pre_hooks.values(): hook(sub, args)`. A call of
; the loop variable in the body is a call of every hook the project
; registers in that table.
;   @replay.loop   the for statement
;   @replay.var    the loop variable (`hook`, or the second of `_, hook`)
;   @replay.table  the table as written (`sub._forward_pre_hooks`)
;   @replay.name   its attribute (`_forward_pre_hooks`)
;   @replay.copy   `list` / `tuple` around the view, where the loop runs over a copy
(for_statement
  left: [
    (identifier) @replay.var
    (pattern_list (_) . (identifier) @replay.var .)
  ]
  right: [
    (call
      function: (attribute
        object: (attribute attribute: (identifier) @replay.name) @replay.table
        attribute: (identifier) @replay.view))
    ; `list(sub._forward_pre_hooks.items())`: a copy taken before the hooks run
    (call
      function: (identifier) @replay.copy
      arguments: (argument_list
        .
        (call
          function: (attribute
            object: (attribute attribute: (identifier) @replay.name) @replay.table
            attribute: (identifier) @replay.view))
        .))
  ]
  (#any-of? @replay.name
    "_forward_pre_hooks" "_forward_hooks"
    "_forward_pre_hooks_with_kwargs" "_forward_hooks_with_kwargs")
  (#any-of? @replay.view "values" "items")
  (#any-of? @replay.copy "list" "tuple" "reversed" "sorted")) @replay.loop

; An attribute set to a bare name (`module.post_bwd_fn = PostBackwardFn`,
; `ctx.post_backward_function = _run_after_backward`): a call through that
; attribute in the same module (`ctx.post_backward_function(ctx.module)`,
; `module.post_bwd_fn.apply(...)`) may reach what the name is there.
;   @held.attr   the attribute
;   @held.value  the name
(assignment
  left: (attribute attribute: (identifier) @held.attr)
  right: (identifier) @held.value)

; `x.attr.apply`, called or handed over as a value
; (`apply_to_tensors_only(module.post_bwd_fn.apply, inputs)`): the
; `forward` and `backward` of the autograd Function class `attr` holds.
;   @held.applying  the attribute `x.attr.apply`
;   @held.holder    `x.attr`
(attribute
  object: (attribute) @held.holder
  attribute: (identifier) @held.apply
  (#eq? @held.apply "apply")) @held.applying
