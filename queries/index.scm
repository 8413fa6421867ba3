; What the project index records of every parsed file, besides its imports
; (`imports.scm`) and calls (`calls.scm`): the functions and classes it
; defines, and the names and attributes whose class an assignment tells.
;
; Captures:
;   @index.def          a function_definition, at any depth
;   @index.def_name     its name
;   @index.lambda       a lambda
;   @index.class        a class_definition
;   @index.class_name   its name
;   @index.local        `x` in `x = Cls(...)` (the value's class is known)
;   @index.local_class  `Cls` there
;   @index.attr         `x` in `self.x = Cls(...)`
;   @index.attr_class   `Cls` there
(function_definition name: (identifier) @index.def_name) @index.def

(lambda) @index.lambda

(class_definition name: (identifier) @index.class_name) @index.class

(assignment
  left: (identifier) @index.local
  right: (call function: [(identifier) (attribute)] @index.local_class))

(assignment
  left: (attribute
    object: (identifier) @index.self
    attribute: (identifier) @index.attr)
  right: (call function: [(identifier) (attribute)] @index.attr_class)
  (#eq? @index.self "self"))

; A module's forward replaced: `m.forward = value`,
; `m.__class__.forward = value`, `setattr(m, "forward", value)`. Rust follows
; the value (through `functools.partial`, `types.MethodType`,
; `functools.update_wrapper`, `f.__get__(m)`, a factory's return) to the
; wrapper, whose calls around the original forward are the hooks.
;
;   @index.fwd          the assignment or setattr call
;   @index.fwd_target   the module expression (`m`, `m.__class__`)
;   @index.fwd_value    the value installed
(assignment
  left: (attribute
    object: (_) @index.fwd_target
    attribute: (identifier) @index.fwd_attr)
  right: (_) @index.fwd_value
  (#eq? @index.fwd_attr "forward")) @index.fwd

; `type(m).forward = f`, which tree-sitter-python reads as a type alias
; statement (`type` is a soft keyword since Python 3.12); CPython reads an
; assignment, since an alias needs a name after `type`. The target is the
; parenthesized expression: `m`'s class (see `installs::target_as_written`).
(type_alias_statement
  left: (type
    (attribute
      object: (parenthesized_expression) @index.fwd_target
      attribute: (identifier) @index.fwd_attr))
  right: (type (_) @index.fwd_value)
  (#eq? @index.fwd_attr "forward")) @index.fwd

(call
  function: (identifier) @index.fwd_setattr
  arguments: (argument_list
    .
    (_) @index.fwd_target
    .
    (string (string_content) @index.fwd_name)
    .
    (_) @index.fwd_value)
  (#eq? @index.fwd_setattr "setattr")
  (#eq? @index.fwd_name "forward")) @index.fwd

; `setattr(m, name, value)` where `name` is a variable: a forward replacement
; where Rust finds that it holds "forward" (a loop over literal names, or a
; parameter a call of the same module passes "forward"; see
; `analysis::installs::names_forward`).
;
;   @index.fwd_named_by   the variable
(call
  function: (identifier) @index.fwd_setattr
  arguments: (argument_list
    .
    (_) @index.fwd_target
    .
    (identifier) @index.fwd_named_by
    .
    (_) @index.fwd_value)
  (#eq? @index.fwd_setattr "setattr")) @index.fwd

; A class swapped in under a live object (`x.__class__ = C`,
; `setattr(x, "__class__", C)`): attribute reads and `forward` then run
; through the functions `C` defines or its namespace holds.
;
;   @index.swap        the assignment or setattr call
;   @index.swap_value  the class installed (a name, or a `type(...)` call)
(assignment
  left: (attribute
    attribute: (identifier) @index.swap_attr)
  right: (_) @index.swap_value
  (#eq? @index.swap_attr "__class__")) @index.swap

(call
  function: (identifier) @index.swap_setattr
  arguments: (argument_list
    .
    (_)
    .
    (string (string_content) @index.swap_name)
    .
    (_) @index.swap_value)
  (#eq? @index.swap_setattr "setattr")
  (#eq? @index.swap_name "__class__")) @index.swap

; A class made by `type(name, bases, {...})` whose namespace puts a function
; where attribute reads (`__getattr__`, `__getattribute__`) or the forward
; run.
;
;   @index.ns_slot   the key
;   @index.ns_value  the function put there
(call
  function: (identifier) @index.ns_type
  arguments: (argument_list
    .
    (_)
    .
    (_)
    .
    (dictionary
      (pair
        key: (string (string_content) @index.ns_slot)
        value: (_) @index.ns_value)))
  (#eq? @index.ns_type "type")
  (#any-of? @index.ns_slot "__getattr__" "__getattribute__" "forward")) @index.ns

; `saved = m.forward`: the name the original forward is kept under.
;   @index.saved  the name
(assignment
  left: (identifier) @index.saved
  right: (attribute attribute: (identifier) @index.saved_attr)
  (#eq? @index.saved_attr "forward"))

; `return value` in a function: what a factory hands back.
;   @index.returned  the value
(return_statement (_) @index.returned)

; Any `name = value` and `self.x = value`: where a hook kept in a variable or
; an attribute before its registration comes from.
;   @index.assigned, @index.assigned_value         `name = value`
;   @index.self_attr, @index.self_attr_value       `self.x = value`
(assignment
  left: (identifier) @index.assigned
  right: (_) @index.assigned_value)

(assignment
  left: (attribute
    object: (identifier) @index.self_object
    attribute: (identifier) @index.self_attr)
  right: (_) @index.self_attr_value
  (#eq? @index.self_object "self"))
