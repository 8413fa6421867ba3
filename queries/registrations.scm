; Calls that register a module hook with torch.
;
; Captures:
;   @registration.call       the whole call
;   @registration.method     the registrar's name (bare or after a dot)
;   @registration.arguments  its argument_list; Rust takes the first positional
;                            argument or `hook=`
;   @registration.backward   the whole call again, when the registrar is a
;                            backward one (second and third patterns)
;   @registration.tensor     the whole call again, when the registrar is a
;                            tensor or autograd one (third pattern)
;
; First pattern (forward; the configuration's `registrars` are added to its
; `#any-of?`): `m.register_forward_pre_hook(...)`, `m.register_forward_hook(...)`
; and the global `register_module_forward_pre_hook(...)` /
; `register_module_forward_hook(...)`, bare or dotted
; (`torch.nn.modules.module.register_module_forward_hook`).
; Second pattern (backward): `m.register_full_backward_pre_hook(...)`,
; `m.register_full_backward_hook(...)` and the global
; `register_module_full_backward_pre_hook(...)` /
; `register_module_full_backward_hook(...)`. Every one of them takes the hook
; first or as `hook=`, like the forward ones.
; Third pattern (tensor and autograd hooks, run at backward time like the
; backward ones): `t.register_hook(f)` on a tensor or a grad accumulator
; (`grad_fn.next_functions[0][0].register_hook(f)`), `.register_prehook(f)`,
; `p.register_post_accumulate_grad_hook(f)`, the engine's
; `Variable._execution_engine.queue_callback(f)`, each with exactly one
; argument (a registry's `register_hook(hook, name)` is no tensor's), and
; `torch.autograd.graph.register_multi_grad_hook(tensors, f)` (the hook is
; its second argument, see `Vocabulary::new`).
; Left out: the deprecated non-full `register_backward_hook`, state-dict
; hooks, and diffusers' / accelerate's own registries
; (`HookRegistry.register_hook`, `add_hook_to_module`), whose hooks are
; ModelHook subclasses and are found through the class rules instead.
(call
  function: [
    (identifier) @registration.method
    (attribute attribute: (identifier) @registration.method)
  ]
  arguments: (argument_list) @registration.arguments
  (#any-of? @registration.method
    "register_forward_pre_hook"
    "register_forward_hook"
    "register_module_forward_pre_hook"
    "register_module_forward_hook")) @registration.call

(call
  function: [
    (identifier) @registration.method
    (attribute attribute: (identifier) @registration.method)
  ]
  arguments: (argument_list) @registration.arguments
  (#any-of? @registration.method
    "register_full_backward_pre_hook"
    "register_full_backward_hook"
    "register_module_full_backward_pre_hook"
    "register_module_full_backward_hook")) @registration.call @registration.backward

(call
  function: (attribute attribute: (identifier) @registration.method)
  arguments: (argument_list . (_) .) @registration.arguments
  (#any-of? @registration.method
    "register_hook"
    "register_prehook"
    "register_post_accumulate_grad_hook"
    "queue_callback")) @registration.call @registration.backward @registration.tensor

(call
  function: [
    (identifier) @registration.method
    (attribute attribute: (identifier) @registration.method)
  ]
  arguments: (argument_list) @registration.arguments
  (#eq? @registration.method "register_multi_grad_hook")) @registration.call @registration.backward @registration.tensor
