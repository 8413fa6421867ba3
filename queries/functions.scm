; Every function definition, at any depth, and every simple `name = value`
; assignment. Used to resolve a name passed to a register call to the def (or
; the `functools.partial(...)` value) it is bound to, following Python scoping.
;
; Captures:
;   @function.def     a function_definition (sync or async)
;   @function.name    its name
;   @assignment.name  the single name on the left of `=`
;   @assignment.value the right-hand side
(function_definition name: (identifier) @function.name) @function.def

(assignment
  left: (identifier) @assignment.name
  right: (_) @assignment.value)
