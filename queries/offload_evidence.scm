; Signs that a function does offload work: it moves, casts or syncs module
; state, gathers or releases partitioned parameters, waits on offload
; streams, or delegates to other hooks. Run over a whole file once; Rust
; gives each sign to the innermost function around it and decides, from the
; receiver and the arguments, whether a move is offload work (module state,
; or a value passed on to a device) or not (a dtype cast of an activation, a
; copy taken aside to hash or log it, a `synchronize()` that times the
; forward). Each capture name is one kind of sign, its text the detail;
; @evidence.call is the call it stands in, where there is one.
;
; Captures:
;   @evidence.move          `.to(...)`, `.cuda(...)`, `.cpu(...)`
;   @evidence.transfer      `send_to_device(...)`, `set_module_tensor_to_device(...)`
;   @evidence.stream        `.synchronize()`, `.record_stream(...)`, `.wait_stream(...)`, `.wait_event(...)`
;   @evidence.onload        a call of anything named *onload* / *offload*
;   @evidence.params        gathering, fetching, releasing, partitioning,
;                           unsharding or resharding parameters (ZeRO, FSDP;
;                           `unshard` exactly, not `unshard_anything` on
;                           activations)
;   @evidence.prefetch      a call of anything named *prefetch*
;   @evidence.storage       `<x>.untyped_storage().resize_(...)` (freeing or
;                           restoring a parameter's storage)
;   @evidence.rng           saving or restoring RNG state
;   @evidence.non_blocking  a `non_blocking=` keyword argument
;   @evidence.data          an assignment to `<x>.data`
;   @evidence.delegate      `<hook>.pre_forward(...)` / `<hook>.post_forward(...)`
;
; Left out on purpose: arithmetic on tensors, `.item()`, `.contiguous()`,
; dtype checks, collective communication on activations (`all_gather` of a
; tensor: context-parallel hooks are meant to be traced) and function names
; that merely contain "synchronize" (diffusers' cache hooks use them).
(call
  function: (attribute attribute: (identifier) @evidence.move)
  (#any-of? @evidence.move "to" "cuda" "cpu")) @evidence.call

(call
  function: [
    (identifier) @evidence.transfer
    (attribute attribute: (identifier) @evidence.transfer)
  ]
  (#any-of? @evidence.transfer "send_to_device" "set_module_tensor_to_device")) @evidence.call

(call
  function: (attribute attribute: (identifier) @evidence.stream)
  (#any-of? @evidence.stream "synchronize" "record_stream" "wait_stream" "wait_event")) @evidence.call

(call
  function: [
    (identifier) @evidence.onload
    (attribute attribute: (identifier) @evidence.onload)
  ]
  (#match? @evidence.onload "(^|_)(on|off)load")) @evidence.call

(call
  function: [
    (identifier) @evidence.params
    (attribute attribute: (identifier) @evidence.params)
  ]
  (#match? @evidence.params "^_*(((un|re)shard(_params|_parameters|_handles?|_module)?)|((fetch|release|gather|all_gather|partition|free)_?(sub_?module|module_?params|params|parameters|param|weights).*))$")) @evidence.call

(call
  function: [
    (identifier) @evidence.prefetch
    (attribute attribute: (identifier) @evidence.prefetch)
  ]
  (#match? @evidence.prefetch "(^|_)prefetch")) @evidence.call

(call
  function: (attribute
    object: (call
      function: (attribute attribute: (identifier) @evidence.storage_of))
    attribute: (identifier) @evidence.storage)
  (#any-of? @evidence.storage_of "untyped_storage" "storage" "_typed_storage")
  (#eq? @evidence.storage "resize_")) @evidence.call

(call
  function: [
    (identifier) @evidence.rng
    (attribute attribute: (identifier) @evidence.rng)
  ]
  (#any-of? @evidence.rng "get_rng_state" "set_rng_state" "fork_rng" "get_rng_state_all" "set_rng_state_all")) @evidence.call

(keyword_argument
  name: (identifier) @evidence.non_blocking
  (#eq? @evidence.non_blocking "non_blocking"))

(assignment
  left: (attribute attribute: (identifier) @evidence.data)
  (#eq? @evidence.data "data"))

(call
  function: (attribute attribute: (identifier) @evidence.delegate)
  (#any-of? @evidence.delegate "pre_forward" "post_forward")) @evidence.call
