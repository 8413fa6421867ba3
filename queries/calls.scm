; Every call, for the project index: what each function calls (to follow
; offload evidence through the project's own functions) and what a forward
; wrapper calls around the original forward.
;
; Captures:
;   @callsite.call      the call
;   @callsite.name      a bare callee (`fetch(m)`)
;   @callsite.receiver  the object of a method call (`self.coordinator` in
;                       `self.coordinator.fetch(m)`)
;   @callsite.method    the method name there
(call
  function: (identifier) @callsite.name) @callsite.call

(call
  function: (attribute
    object: (_) @callsite.receiver
    attribute: (identifier) @callsite.method)) @callsite.call
