//! A cheap reading of a file's text, before it is parsed: whether it may
//! move a module in place (see [`moves_a_module_in_place`]), one of the
//! signs that make a file's forwards roots (`prefilter::may_define_forward`).

/// Whether `text` may move a module in place: a line that starts (after
/// its indentation) with a call of `.to(...)` (or `.half()`, `.float()`,
/// `.double()`, `.bfloat16()`, `.to_empty(...)`) on a name, an attribute or
/// an item (`self.inner.to(device)`, `blocks[i].half()`), a statement of its
/// own: the last line before it that is neither blank nor only a comment
/// does not leave a bracket, a comma, an operator or a backslash open.
/// `Tensor.to` hands back a copy and changes nothing, so such a statement,
/// its value dropped, means a receiver changed in place: a module
/// (`Module.to` moves its parameters and returns itself). Read without
/// parsing and in one pass over the lines, so it may also take a call
/// whose value is used further on the line (`m.to(d).eval()`) or text in a
/// string: the file's forwards are then looked at, and the analysis judges
/// what each call does.
pub fn moves_a_module_in_place(text: &str) -> bool {
    const METHODS: &[&[u8]] = &[
        b".to",
        b".half",
        b".float",
        b".double",
        b".bfloat16",
        b".to_empty",
    ];
    const OPEN: &[u8] = b"([{,\\=+-*/|&%@<>";
    let bytes = text.as_bytes();
    let is_receiver_byte =
        |b: u8| b == b'_' || b == b'.' || b == b'[' || b == b']' || b.is_ascii_alphanumeric();
    // The last byte of the last line that held code, if any.
    let mut last_code: Option<u8> = None;
    let mut start = 0;
    while start < bytes.len() {
        let end = memchr::memchr(b'\n', &bytes[start..]).map_or(bytes.len(), |i| start + i);
        let line = &bytes[start..end];
        let indent = line
            .iter()
            .take_while(|&&b| b == b' ' || b == b'\t')
            .count();
        let code = &line[indent..];
        let receiver_len = code.iter().take_while(|&&b| is_receiver_byte(b)).count();
        let receiver = &code[..receiver_len];
        if code.get(receiver_len) == Some(&b'(')
            && receiver
                .first()
                .is_some_and(|&b| b == b'_' || b.is_ascii_alphabetic())
            && METHODS
                .iter()
                .any(|m| receiver.len() > m.len() && receiver.ends_with(m))
            && !last_code.is_some_and(|b| OPEN.contains(&b))
        {
            return true;
        }
        let trimmed = code.trim_ascii_end();
        if !trimmed.is_empty() && trimmed[0] != b'#' {
            last_code = trimmed.last().copied();
        }
        start = end + 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_move_of_a_receiver_is_read_as_a_move_in_place() {
        for text in [
            "def load(m):\n    m.to('cuda')\n",
            "class A:\n    def f(self):\n        self.inner.to(self.device)\n",
            "for b in blocks:\n    blocks[i].half()\n",
            "x = 1\nmodel.float()\n",
            "if ok:\n\tself.net.to_empty(device='cuda')\n",
            // A comment line between does not continue the statement.
            "x = 1\n# ---- onload ----\nmodel.to(dev)\n",
        ] {
            assert!(moves_a_module_in_place(text), "{text}");
        }
        for text in [
            // A copy used as a value, an argument, a continued expression.
            "y = x.to('cuda')\n",
            "return x.to(dev)\n",
            "f(\n    x.to(dev),\n)\n",
            "y = (a +\n    b.float())\n",
            "z = [\n  w.half()\n]\n",
            "out = a \\\n    .to(dev)\n",
            "nothing here\n",
            // No receiver, or a method that only ends like one.
            ".to(dev)\n",
            "x.total(dev)\n",
            "x.photo(dev)\n",
        ] {
            assert!(!moves_a_module_in_place(text), "{text}");
        }
    }

    #[test]
    fn long_lines_of_moves_and_receivers_are_read_as_statements() {
        // One line of many chained `.to(` calls (a value used, no statement
        // of its own) and one with a very long receiver (one). Each line is
        // read once (`bench/hostile.py` times the first at n and 2n).
        let chained = format!("y = x{}\n", ".to(d)".repeat(200_000));
        let receiver = format!("{}.half(\n", "a".repeat(1_000_000));
        assert!(!moves_a_module_in_place(&chained));
        assert!(moves_a_module_in_place(&receiver));
    }
}
