; Every call, for the project index: what each function calls (to follow
; offload evidence through the project's own functions) and what a forward
; wrapper calls around the original forward.
;
; Captures:
;   @callsite.call       the call
;   @callsite.name       a bare callee (`fetch(m)`)
;   @callsite.attribute  the callee of a method call (`self.coordinator.fetch`
;                        in `self.coordinator.fetch(m)`); Rust reads its
;                        `object` (the receiver) and `attribute` (the method)
;                        fields. The pattern stops at the attribute node: one
;                        that named its fields would wait below every call of
;                        a method-call chain for the method name after the
;                        receiver, a pending match per enclosing call.
(call
  function: (identifier) @callsite.name) @callsite.call

(call
  function: (attribute) @callsite.attribute) @callsite.call
