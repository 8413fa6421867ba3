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
