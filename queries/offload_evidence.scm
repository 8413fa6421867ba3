; Evidence that a hook body does offload work: it moves, casts or syncs module
; state, or delegates to other hooks. Run over one hook body (or lambda) at a
; time; each capture name is one kind of evidence, its text the detail.
;
; Captures:
;   @evidence.move          `.to(...)`, `.cuda(...)`, `.cpu(...)`
;   @evidence.transfer      `send_to_device(...)`, `set_module_tensor_to_device(...)`
;   @evidence.stream        `.synchronize()`, `.record_stream(...)`
;   @evidence.onload        a call of anything named *onload* / *offload*
;   @evidence.non_blocking  a `non_blocking=` keyword argument
;   @evidence.data          an assignment to `<x>.data`
;   @evidence.delegate      `<hook>.pre_forward(...)` / `<hook>.post_forward(...)`
;
; Left out on purpose: arithmetic on tensors, `.item()`, `.contiguous()`,
; dtype checks and function names that merely contain "synchronize" (diffusers'
; cache hooks use them and are meant to be traced).
(call
  function: (attribute attribute: (identifier) @evidence.move)
  (#any-of? @evidence.move "to" "cuda" "cpu"))

(call
  function: [
    (identifier) @evidence.transfer
    (attribute attribute: (identifier) @evidence.transfer)
  ]
  (#any-of? @evidence.transfer "send_to_device" "set_module_tensor_to_device"))

(call
  function: (attribute attribute: (identifier) @evidence.stream)
  (#any-of? @evidence.stream "synchronize" "record_stream"))

(call
  function: [
    (identifier) @evidence.onload
    (attribute attribute: (identifier) @evidence.onload)
  ]
  (#match? @evidence.onload "(^|_)(on|off)load"))

(keyword_argument
  name: (identifier) @evidence.non_blocking
  (#eq? @evidence.non_blocking "non_blocking"))

(assignment
  left: (attribute attribute: (identifier) @evidence.data)
  (#eq? @evidence.data "data"))

(call
  function: (attribute attribute: (identifier) @evidence.delegate)
  (#any-of? @evidence.delegate "pre_forward" "post_forward"))
