; Import bindings, one match per bound name, at any depth.
;
; Captures:
;   @import.module       `import a.b` (binds `a`) or the module of `from a.b import c`
;   @import.name         the imported name in `from a.b import c`
;   @import.alias        the `as` name, where there is one
;
; Rust turns each match into `bound name -> dotted path` and decides scope
; (module level or not) from the statement's ancestors. Relative imports
; (`from . import x`) are left out: they never bind torch.
(import_statement
  name: (dotted_name) @import.module)

(import_statement
  name: (aliased_import
    name: (dotted_name) @import.module
    alias: (identifier) @import.alias))

(import_from_statement
  module_name: (dotted_name) @import.module
  name: (dotted_name) @import.name)

(import_from_statement
  module_name: (dotted_name) @import.module
  name: (aliased_import
    name: (dotted_name) @import.name
    alias: (identifier) @import.alias))
