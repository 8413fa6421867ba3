; What makes a Python scope and what binds a name, for the per-file semantic
; model (`src/scope.rs`). The patterns only say where to look; Rust reads the
; fields of each node (targets, parameters, imported names) and decides, with
; Python's rules, which scope each binding belongs to and where it holds.
;
; Scopes:
;   @scope.function       a def (its parameters and body)
;   @scope.class          a class (its body)
;   @scope.lambda         a lambda (its parameters and body)
;   @scope.comprehension  a comprehension or generator expression
(function_definition) @scope.function
(class_definition) @scope.class
(lambda) @scope.lambda
[
  (list_comprehension)
  (set_comprehension)
  (dictionary_comprehension)
  (generator_expression)
] @scope.comprehension

; Statements that bind:
;   @binding.import      `import a.b`, `import a as b`, `from m import x [as y]`, `from m import *`
;   @binding.assignment  `x = ...`, `a, *b = ...`, `x: T = ...`, `x: T`
;   @binding.augmented   `x += ...`
;   @binding.delete      `del x, y`
;   @binding.for         a for loop: its targets, and a loop the flow can come back around
;   @binding.while       a while loop: a loop the flow can come back around
;   @binding.global      `global x`
;   @binding.nonlocal    `nonlocal x`
[
  (import_statement)
  (import_from_statement)
] @binding.import
(assignment) @binding.assignment
(augmented_assignment) @binding.augmented
(delete_statement) @binding.delete
(for_statement) @binding.for
(while_statement) @binding.while
(global_statement) @binding.global
(nonlocal_statement) @binding.nonlocal

; Expressions and clauses that bind:
;   @binding.comprehension_for  the targets of a comprehension's `for`
;   @binding.with               `with ... as target`
;   @binding.except             `except E as name`
;   @binding.walrus             `name := value`
(for_in_clause) @binding.comprehension_for
(with_item
  value: (as_pattern
    alias: (as_pattern_target) @binding.with))
(except_clause
  value: (as_pattern
    alias: (as_pattern_target) @binding.except))
(named_expression
  name: (_) @binding.walrus)

; Capture patterns of `match` (a bare name, `... as name`, `*name`, `**name`);
; a dotted name is a value pattern and binds nothing, and so does a class
; pattern's class.
;   @binding.capture  the captured name
(case_pattern
  (dotted_name . (identifier) @binding.capture .))
(union_pattern
  (dotted_name . (identifier) @binding.capture .))
(keyword_pattern
  (dotted_name . (identifier) @binding.capture .))
(case_pattern
  (as_pattern
    (identifier) @binding.capture))
(splat_pattern
  (identifier) @binding.capture)
