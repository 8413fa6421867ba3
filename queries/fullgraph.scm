; `fullgraph=True` passed to any call (in practice `torch.compile(...)`):
; with a disabled hook in the model it raises as soon as the hook runs, so
; hookfence points it out.
;
; Captures:
;   @fullgraph.argument  the keyword argument
;
; Left out: `fullgraph=flag` with a variable (its value is not known here).
(keyword_argument
  name: (identifier) @fullgraph.name
  value: (true)
  (#eq? @fullgraph.name "fullgraph")) @fullgraph.argument
