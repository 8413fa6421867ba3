//! Edits as byte ranges of the original text, grouped into all-or-nothing
//! fixes, applied by copying slices of the original into a new buffer.

/// Replace `start..end` of the original with `replacement` (an insertion when
/// the range is empty).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub replacement: String,
}

impl Edit {
    pub fn insert(at: usize, text: impl Into<String>) -> Edit {
        Edit {
            start: at,
            end: at,
            replacement: text.into(),
        }
    }

    fn overlaps(&self, other: &Edit) -> bool {
        // Two insertions at one point, or an insertion at a replacement's
        // edge, do not overlap; ranges that share bytes do.
        self.start < other.end && other.start < self.end
    }
}

/// The edits that fence one hook; applied whole or not at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix {
    pub edits: Vec<Edit>,
}

/// The result of applying fixes to a text.
#[derive(Debug)]
pub struct Applied {
    pub text: String,
    /// Indices of fixes that were skipped because they overlap an earlier one.
    pub skipped: Vec<usize>,
    /// The edits made, in the order of the text (ranges of the original).
    pub made: Vec<Edit>,
}

/// Applies `fixes` in order: a fix whose edits overlap an already accepted
/// edit, or each other, is skipped (and reported by index); byte-identical
/// edits shared by several fixes (the `import torch` line) are applied once.
/// Among edits at the same offset, the earlier-accepted comes first.
pub fn apply(text: &str, fixes: &[Fix]) -> Applied {
    let mut accepted: Vec<(usize, &Edit)> = Vec::new();
    // The accepted edits by range, and the edits themselves: whether a new
    // edit is one of them, or overlaps one, is a look-up (a file with
    // thousands of hooks is not checked edit against edit).
    let mut ranges: std::collections::BTreeSet<(usize, usize)> = std::collections::BTreeSet::new();
    let mut made: std::collections::HashSet<&Edit> = std::collections::HashSet::new();
    let mut skipped = Vec::new();
    let mut sequence = 0;
    for (index, fix) in fixes.iter().enumerate() {
        let fresh: Vec<&Edit> = fix.edits.iter().filter(|e| !made.contains(*e)).collect();
        // A fix whose own edits overlap cannot be applied either (slicing
        // would run backwards): it is skipped like any other conflict.
        if fresh
            .iter()
            .enumerate()
            .any(|(i, e)| overlaps_any(&ranges, e) || fresh[..i].iter().any(|f| f.overlaps(e)))
        {
            skipped.push(index);
            continue;
        }
        for edit in fresh {
            made.insert(edit);
            ranges.insert((edit.start, edit.end));
            accepted.push((sequence, edit));
            sequence += 1;
        }
    }
    accepted.sort_by_key(|(seq, edit)| (edit.start, edit.end, *seq));
    let mut out = String::with_capacity(text.len() + 64 * accepted.len());
    let mut cursor = 0;
    for (_, edit) in &accepted {
        out.push_str(&text[cursor..edit.start]);
        out.push_str(&edit.replacement);
        cursor = edit.end;
    }
    out.push_str(&text[cursor..]);
    Applied {
        text: out,
        skipped,
        made: accepted.into_iter().map(|(_, edit)| edit.clone()).collect(),
    }
}

/// Whether `edit` overlaps one of the accepted `ranges`, which overlap
/// no other: the last range starting before it (ranges that share no byte
/// end in the order they start) and those starting inside it.
fn overlaps_any(ranges: &std::collections::BTreeSet<(usize, usize)>, edit: &Edit) -> bool {
    let shares = |&(start, end): &(usize, usize)| start < edit.end && edit.start < end;
    ranges
        .range(..(edit.start, 0))
        .next_back()
        .is_some_and(shares)
        || ranges.range((edit.start, 0)..(edit.end, 0)).any(shares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_edits_apply_once_and_order_is_stable() {
        let import = Edit::insert(0, "import torch\n");
        let fixes = vec![
            Fix {
                edits: vec![import.clone(), Edit::insert(6, "@d\n")],
            },
            Fix {
                edits: vec![import, Edit::insert(20, "@d\n")],
            },
        ];
        let applied = apply("x = 1\ndef f(): pass\n", &fixes);
        assert_eq!(applied.text, "import torch\nx = 1\n@d\ndef f(): pass\n@d\n");
        assert!(applied.skipped.is_empty());
    }

    #[test]
    fn overlapping_fix_is_skipped_whole() {
        let fixes = vec![
            Fix {
                edits: vec![Edit {
                    start: 0,
                    end: 3,
                    replacement: "abc".into(),
                }],
            },
            Fix {
                edits: vec![
                    Edit::insert(5, "!"),
                    Edit {
                        start: 2,
                        end: 4,
                        replacement: "zz".into(),
                    },
                ],
            },
        ];
        let applied = apply("0123456", &fixes);
        assert_eq!(applied.text, "abc3456");
        assert_eq!(applied.skipped, vec![1]);
    }

    /// The look-up agrees with checking every accepted edit, on random
    /// fixes of inserts and replacements (fixed seeds).
    #[test]
    fn overlap_lookup_agrees_with_pairwise_checks() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |bound: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % bound as u64).unwrap_or(0)
        };
        let text = "0123456789abcdefghijklmnopqrstuvwxyz";
        for _ in 0..2_000 {
            let fixes: Vec<Fix> = (0..1 + next(6))
                .map(|_| Fix {
                    edits: (0..1 + next(3))
                        .map(|_| {
                            let start = next(text.len() + 1);
                            let end = (start + next(4).saturating_sub(1)).min(text.len());
                            Edit {
                                start,
                                end,
                                replacement: ["", "@", "xy"][next(3)].to_owned(),
                            }
                        })
                        .collect(),
                })
                .collect();
            let applied = apply(text, &fixes);
            // The same decisions, edit against edit.
            let mut accepted: Vec<&Edit> = Vec::new();
            let mut skipped = Vec::new();
            for (index, fix) in fixes.iter().enumerate() {
                let fresh: Vec<&Edit> =
                    fix.edits.iter().filter(|e| !accepted.contains(e)).collect();
                if fresh.iter().enumerate().any(|(i, e)| {
                    accepted.iter().any(|a| a.overlaps(e))
                        || fresh[..i].iter().any(|f| f.overlaps(e))
                }) {
                    skipped.push(index);
                } else {
                    accepted.extend(fresh);
                }
            }
            assert_eq!(applied.skipped, skipped, "{fixes:?}");
            assert_eq!(applied.made.len(), accepted.len(), "{fixes:?}");
        }
    }
}
