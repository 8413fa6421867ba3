; Every class statement, at any depth, with its base-class list.
;
; Captures:
;   @class.def    the class_definition
;   @class.name   its name
;   @class.bases  the argument_list of bases (absent for `class A:`)
;
; Bases are read in Rust (identifiers and dotted names; keyword arguments such
; as `metaclass=` are ignored) to build the cross-file class index.
(class_definition
  name: (identifier) @class.name
  superclasses: (argument_list)? @class.bases) @class.def
