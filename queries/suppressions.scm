; A comment that starts `# hookfence: ignore` or `# hookfence: ignore[reason]`
; keeps hookfence off the hook whose `def` line (or the line right above it)
; holds it.
; A suppression that matches no hook is reported.
;
; Captures:
;   @suppression.comment  the comment; Rust reads the reason between brackets
;
; Only comments count: the same words in a string or docstring do not.
((comment) @suppression.comment
  (#match? @suppression.comment "^#[ \t]*hookfence:[ \t]*ignore"))
