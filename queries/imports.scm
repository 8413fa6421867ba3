; Import bindings, one match per bound name, at any depth.
;
; Captures:
;   @import.module       `import a.b` (binds `a`) or the module of `from a.b import c`
;   @import.name         the imported name in `from a.b import c`
;   @import.alias        the `as` name, where there is one
;   @import.star         `*` of `from a.b import *`: binds every public name
;                        of a.b (the project looks names up there too)
;
; Rust turns each match into `bound name -> dotted path` and decides scope
; (module level or not) from the statement's ancestors. Relative imports
; bind no torch name; the last pattern only notes that the file uses them.
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

(import_from_statement
  module_name: (dotted_name) @import.module
  (wildcard_import) @import.star)

(import_from_statement
  module_name: (relative_import) @import.relative
  (wildcard_import) @import.star)

; Relative imports: `from . import x`, `from .utils import y as z`. They bind
; names like the others, and their presence tells how a package imports its
; siblings, which the wrap strategy follows when it imports its helper.
;
; Captures:
;   @import.relative  the relative module (`.`, `..utils`)
;   @import.name, @import.alias  as above
(import_from_statement
  module_name: (relative_import) @import.relative
  name: (dotted_name) @import.name)

(import_from_statement
  module_name: (relative_import) @import.relative
  name: (aliased_import
    name: (dotted_name) @import.name
    alias: (identifier) @import.alias))
