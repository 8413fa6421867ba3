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

/// Whether `text` spells one of `signs` (the literal signs of weight work a
/// forward's file is asked for) other than as a tensor handed to the host
/// as data: `.cpu()` followed, through a chain of calls with no nested
/// brackets (`.detach()`, `.float()`, `.permute(0, 2, 1)`), by `.numpy()`,
/// `.tolist()` or `.item()` is a conversion to NumPy or Python values,
/// which no module's state ever is (a model's post-processing,
/// `logits.cpu().numpy()`), so it is no sign. Every other match is.
pub fn spells_a_sign(signs: &aho_corasick::AhoCorasick, text: &str) -> bool {
    let bytes = text.as_bytes();
    signs.find_iter(text).any(|found| {
        let spelled = &bytes[found.start()..found.end()];
        !(spelled == b".cpu(" && hands_to_the_host_as_data(&bytes[found.end()..]))
    })
}

/// Whether `rest` (what follows `.cpu(`) closes the call and, through
/// calls with no nested brackets, reaches `.numpy(`, `.tolist(` or
/// `.item(`. At most 8 links.
fn hands_to_the_host_as_data(rest: &[u8]) -> bool {
    const DATA: &[&[u8]] = &[b"numpy", b"tolist", b"item"];
    let Some(mut at) = rest.first().filter(|&&b| b == b')').map(|_| 1) else {
        return false;
    };
    for _ in 0..8 {
        if rest.get(at) != Some(&b'.') {
            return false;
        }
        let name_start = at + 1;
        let name_end = name_start
            + rest[name_start..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
                .count();
        if name_end == name_start || rest.get(name_end) != Some(&b'(') {
            return false;
        }
        if DATA.contains(&&rest[name_start..name_end]) {
            return true;
        }
        // The call's arguments, with no bracket nested in them.
        let Some(close) = rest[name_end + 1..]
            .iter()
            .position(|&b| matches!(b, b')' | b'(' | b'[' | b']' | b'\n'))
        else {
            return false;
        };
        let close = name_end + 1 + close;
        if rest[close] != b')' {
            return false;
        }
        at = close + 1;
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

    #[test]
    fn a_tensor_handed_to_the_host_as_data_is_no_sign() {
        let signs = aho_corasick::AhoCorasick::new([".cpu(", "non_blocking"]).expect("signs");
        for text in [
            "y = logits.cpu().numpy()\n",
            "n = x.detach().cpu().float().numpy()\n",
            "ids = out.cpu().permute(0, 2, 1).tolist()\n",
            "v = loss.cpu().item()\n",
        ] {
            assert!(!spells_a_sign(&signs, text), "{text}");
        }
        for text in [
            // Copies that stay tensors, or a module moved.
            "x = x.cpu()\n",
            "self.block.cpu()\n",
            "w = p.data.cpu().pin_memory()\n",
            "v = x.cpu().reshape(f(a)).numpy()\n",
            "v = x.cpu(\n).numpy()\n",
            // Another sign beside a conversion.
            "y = logits.cpu().numpy()\nw.to(d, non_blocking=True)\n",
            "y = a.cpu().numpy(); b.cpu()\n",
        ] {
            assert!(spells_a_sign(&signs, text), "{text}");
        }
    }
}
