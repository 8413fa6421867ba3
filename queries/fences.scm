; Places where a function can already be fenced.
;
; Captures:
;   @call.function        the callee of any call (a name or dotted name); Rust
;                         resolves it through the file's imports to tell whether
;                         it is `torch.compiler.disable` / `torch._dynamo.disable`
;                         or a local wrapper around them
;   @patch.owner          `Cls` in a module-level `Cls.meth = fence(Cls.meth)`
;   @patch.attribute      `meth` there
;   @patch.function       `fn` in a module-level `fn = fence(fn)`
;   @patch.fence          the callee `fence`
;   @patch.target         its single argument
;   @optout.comment       a comment that is a commented-out disable decorator,
;                         e.g. `# @torch.compiler.disable()`; Rust checks it
;                         stands right above a hook
(call
  function: [(identifier) (attribute)] @call.function)

(module
  (expression_statement
    (assignment
      left: (attribute
        object: (identifier) @patch.owner
        attribute: (identifier) @patch.attribute)
      right: (call
        function: [(identifier) (attribute)] @patch.fence
        arguments: (argument_list . (attribute) @patch.target .)))))

(module
  (expression_statement
    (assignment
      left: (identifier) @patch.function
      right: (call
        function: [(identifier) (attribute)] @patch.fence
        arguments: (argument_list . (identifier) @patch.target .)))))

((comment) @optout.comment
  (#match? @optout.comment "^#[ \t]*@[ \t]*[A-Za-z_][A-Za-z0-9_.]*disable([ \t(]|$)"))
