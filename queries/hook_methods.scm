; Hook protocol methods defined directly in a class body.
;
; Captures:
;   @hook.class   the class_definition that holds the method
;   @hook.def     the function_definition of the method
;   @hook.name    its name
;
; Whether the class really derives from a hook protocol base (possibly through
; classes in other files) is decided in Rust, from the class index.
; Left out: methods nested in `if`/`try` blocks of a class body, and methods
; attached after the class statement (those are seen by the monkeypatch rules).
(class_definition
  body: (block
    [
      (function_definition name: (identifier) @hook.name) @hook.def
      (decorated_definition
        definition: (function_definition name: (identifier) @hook.name) @hook.def)
    ])
  (#any-of? @hook.name "pre_forward" "post_forward")) @hook.class
