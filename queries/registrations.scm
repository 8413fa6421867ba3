; Calls that register a forward hook with torch.
;
; Captures:
;   @registration.call       the whole call
;   @registration.method     the registrar's name (bare or after a dot)
;   @registration.arguments  its argument_list; Rust takes the first positional
;                            argument or `hook=`
;
; Matches `m.register_forward_pre_hook(...)`, `m.register_forward_hook(...)`
; and the global `register_module_forward_pre_hook(...)` /
; `register_module_forward_hook(...)`, bare or dotted
; (`torch.nn.modules.module.register_module_forward_hook`).
; Left out: backward hooks, state-dict hooks, and diffusers' / accelerate's own
; registries (`HookRegistry.register_hook`, `add_hook_to_module`), whose hooks
; are ModelHook subclasses and are found through the class rules instead.
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
