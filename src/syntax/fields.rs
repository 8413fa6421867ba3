//! A node's child by field name, the field's id found once: tree-sitter's
//! own `child_by_field_name` compares the name with every field name of
//! the grammar at each call, and the analysis asks for fields everywhere.

use tree_sitter::Node;

/// A node's child by field name (see the module documentation).
pub trait Field<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>>;
}

impl<'t> Field<'t> for Node<'t> {
    #[inline]
    fn field(&self, name: &str) -> Option<Node<'t>> {
        field_id(name).and_then(|id| self.child_by_field_id(id))
    }
}

/// The fields the analysis asks for, most asked first: each found by a
/// `match` on the name (a compare of a few bytes), its id read once.
const ASKED_FIELDS: [&str; 21] = [
    "name",
    "value",
    "function",
    "attribute",
    "object",
    "left",
    "right",
    "arguments",
    "parameters",
    "body",
    "definition",
    "alias",
    "superclasses",
    "module_name",
    "consequence",
    "type",
    "subscript",
    "operator",
    "key",
    "condition",
    "argument",
];

/// The grammar's id for the field `name`, if it has one.
fn field_id(name: &str) -> Option<u16> {
    static ASKED: std::sync::LazyLock<[Option<u16>; ASKED_FIELDS.len()]> =
        std::sync::LazyLock::new(|| ASKED_FIELDS.map(field_id_by_name));
    let slot = match name {
        "name" => 0,
        "value" => 1,
        "function" => 2,
        "attribute" => 3,
        "object" => 4,
        "left" => 5,
        "right" => 6,
        "arguments" => 7,
        "parameters" => 8,
        "body" => 9,
        "definition" => 10,
        "alias" => 11,
        "superclasses" => 12,
        "module_name" => 13,
        "consequence" => 14,
        "type" => 15,
        "subscript" => 16,
        "operator" => 17,
        "key" => 18,
        "condition" => 19,
        "argument" => 20,
        _ => return field_id_by_name(name),
    };
    ASKED[slot]
}

/// [`field_id`] for any name: a binary search of the grammar's fields.
fn field_id_by_name(name: &str) -> Option<u16> {
    static IDS: std::sync::LazyLock<Vec<(String, u16)>> = std::sync::LazyLock::new(|| {
        let language = crate::queries::language();
        let mut ids: Vec<(String, u16)> = (1..=language.field_count())
            .filter_map(|id| {
                let id = u16::try_from(id).ok()?;
                Some((language.field_name_for_id(id)?.to_owned(), id))
            })
            .collect();
        ids.sort_unstable();
        ids
    });
    IDS.binary_search_by(|(field, _)| field.as_str().cmp(name))
        .ok()
        .map(|at| IDS[at].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field id, asked by name, is the grammar's own; a name that is
    /// no field has none.
    #[test]
    fn field_ids_are_the_grammars() {
        let language = crate::queries::language();
        for id in 1..=language.field_count() {
            let id = u16::try_from(id).unwrap();
            let name = language.field_name_for_id(id).unwrap();
            assert_eq!(field_id(name), Some(id), "{name}");
            assert_eq!(language.field_id_for_name(name).map(|f| f.get()), Some(id));
        }
        for name in ASKED_FIELDS {
            assert!(
                field_id(name).is_some(),
                "{name} is no field of the grammar"
            );
        }
        assert_eq!(field_id("no_such_field"), None);
    }
}
